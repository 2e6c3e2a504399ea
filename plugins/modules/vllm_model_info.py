#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_model_info
short_description: Read what local model directories hold (weights, dtype, architecture, quantization)
version_added: 0.1.0
description:
  - For each directory, stats the top-level files and reads C(config.json), C(model.safetensors.index.json),
    C(quantize_config.json) and the JSON header at the start of each C(*.safetensors) file. Tensor data is never
    read, so a directory of many gigabytes is summarised in milliseconds.
  - Returns, per directory, the bytes of the weight files vLLM would load (the same file selection as vLLM's
    loader), the architectures, the checkpoint dtype, the quantization and the bytes of floating-point and
    integer tensors (from the headers). The vllm_serve role sizes the KV cache from them with the rules in
    C(plugins/module_utils/vllm_model_info.py) (see docs/tuning.md).
  - A directory that is missing or cannot be read is reported under RV(errors), not as a failure, so the caller
    decides which variable to name in its message.
options:
  paths:
    description: Absolute paths of model directories on the host. Links (such as a C(current) link) are followed.
    type: list
    elements: path
    required: true
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Read-only; supports check mode and never reports a change.
"""

EXAMPLES = r"""
- name: Read the model an instance serves
  arm_inference.vllm.vllm_model_info:
    paths: [/var/lib/vllm-models/llama/current]
  register: __models
"""

RETURN = r"""
models:
  description: Summary of each readable directory, keyed by the path as given.
  returned: always
  type: dict
  sample:
    /var/lib/vllm-models/llama/current:
      architectures: [LlamaForCausalLM]
      torch_dtype: bfloat16
      quantization: null
      weight_format: safetensors
      weight_bytes: 16060556376
      weight_gib: 14.96
      index_total_size: 16060522496
errors:
  description: Why a directory could not be summarised, keyed by the path as given.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_survey import model_info


def main():
    module = AnsibleModule(argument_spec={"paths": {"type": "list", "elements": "path", "required": True}},
                           supports_check_mode=True)
    module.exit_json(changed=False, **model_info(module.params["paths"]))


if __name__ == "__main__":
    main()
