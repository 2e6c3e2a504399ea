#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: venv_requirements
short_description: Tell which pip requirements a virtual environment does not satisfy yet, without running pip
version_added: 0.1.0
description:
  - Runs the venv's own Python once, isolated (C(-I)), and compares each requirement specifier with the
    distribution installed there, using the C(packaging) library that the venv's pip carries. Reads only.
  - A requirement it cannot judge (a URL, a path, extras, an option, an unparsable line, a venv without pip or
    without Python) counts as not satisfied, so the caller runs pip for it as before.
  - Lets a converged host skip C(pip install) (several seconds of CPU per run and host, far more under emulation).
options:
  python:
    description: The venv's Python (C(<venv>/bin/python)).
    type: path
    required: true
  requirements:
    description: Pip requirement specifiers, for example C(pip==25.2) or C(cmake>=3.26).
    type: list
    elements: str
    required: true
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Supports check mode (it never changes anything).
"""

EXAMPLES = r"""
- name: Find the bootstrap tools the venv still needs
  arm_inference.vllm.venv_requirements:
    python: /opt/vllm/venv/bin/python
    requirements: ["pip==25.2", "setuptools==80.9.0", "wheel==0.45.1"]
  register: pending
"""

RETURN = r"""
unsatisfied:
  description: The requirements pip still has to install (in the order given); empty when all are satisfied.
  returned: always
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

# Runs in the venv's Python: prints the requirements (argv) its installed distributions do not satisfy.
PROBE = r"""
import json, sys
from importlib import metadata
try:
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name
except ImportError:
    print(json.dumps(sys.argv[1:]))
    raise SystemExit(0)
installed = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if name:
        installed.setdefault(canonicalize_name(name), dist.version)
unsatisfied = []
for text in sys.argv[1:]:
    try:
        requirement = Requirement(text)
    except Exception:
        unsatisfied.append(text)
        continue
    if requirement.marker is not None and not requirement.marker.evaluate():
        continue
    version = installed.get(canonicalize_name(requirement.name))
    if requirement.url or requirement.extras or version is None or \
            not requirement.specifier.contains(version, prereleases=True):
        unsatisfied.append(text)
print(json.dumps(unsatisfied))
"""


def unsatisfied(run_command, python, requirements):
    """The requirements the venv of `python` does not satisfy; all of them when it cannot be asked.
    run_command(argv) -> (rc, stdout, stderr), as AnsibleModule.run_command."""
    requirements = list(requirements)
    if not requirements:
        return []
    if not os.access(python, os.X_OK):
        return requirements
    returncode, stdout, dummy = run_command([python, "-I", "-c", PROBE] + requirements)
    try:
        answer = json.loads(stdout.strip().splitlines()[-1]) if returncode == 0 else None
    except (ValueError, IndexError):
        answer = None
    if not isinstance(answer, list) or not all(item in requirements for item in answer):
        return requirements
    return answer


def main():
    module = AnsibleModule(argument_spec={"python": {"type": "path", "required": True},
                                          "requirements": {"type": "list", "elements": "str", "required": True}},
                           supports_check_mode=True)
    pending = unsatisfied(module.run_command, module.params["python"], module.params["requirements"])
    module.exit_json(changed=False, unsatisfied=pending)


if __name__ == "__main__":
    main()
