#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: shared_library_info
short_description: Find the real path of a shared library for the host's architecture
version_added: 0.1.0
description:
  - Finds where a shared library (by file name, for example C(libtcmalloc_minimal.so.4)) really is
    on the host, so it can be used in C(LD_PRELOAD) without assuming a distro's directory layout.
  - Candidates come from the files of the given packages (C(dpkg-query -L) or C(rpm -ql)) and from
    the dynamic linker cache (C(ldconfig -p)). Each candidate must be an ELF shared object built for
    the host's machine type; others (for example i386 multilib copies) are rejected with a reason.
options:
  name:
    description: File name of the library, usually its soname.
    type: str
    required: true
  packages:
    description: Packages whose installed files are searched first.
    type: list
    elements: str
    default: []
  required:
    description: Fail when no suitable library is found. With V(false), RV(path) is null instead.
    type: bool
    default: true
  prove_preload:
    description:
      - Start a process (C(cat /proc/self/maps)) with the library found in C(LD_PRELOAD) and fail unless that process
        mapped it. The dynamic linker only warns when C(LD_PRELOAD) names an unusable file and carries on without it.
    type: bool
    default: false
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Read-only; supports check mode.
"""

EXAMPLES = r"""
- name: Find tcmalloc for LD_PRELOAD
  arm_inference.vllm.shared_library_info:
    name: libtcmalloc_minimal.so.4
    packages: [libtcmalloc-minimal4]
  register: __tcmalloc
"""

RETURN = r"""
path:
  description: Absolute path of the library as installed (the soname link, stable across upgrades).
  returned: always
  type: str
  sample: /usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4
real_path:
  description: The file the path resolves to.
  returned: when found
  type: str
  sample: /usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4.5.16
machine:
  description: Machine type the library was checked against.
  returned: always
  type: str
  sample: aarch64
rejected:
  description: Candidates that were refused, with the reason.
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils.shared_library import (
    candidates_from_file_list,
    choose_library,
    normalize_machine,
    parse_ldconfig_cache,
    preload_problem,
)


def _package_file_candidates(module, packages, soname):
    dpkg_query = module.get_bin_path("dpkg-query")
    rpm = module.get_bin_path("rpm")
    candidates = []
    for package in packages:
        if dpkg_query:
            rc, out, dummy = module.run_command([dpkg_query, "-L", package])
        elif rpm:
            rc, out, dummy = module.run_command([rpm, "-ql", package])
        else:
            return candidates
        if rc == 0:
            candidates.extend(candidates_from_file_list(out, soname))
    return candidates


def _ldconfig_candidates(module, soname):
    ldconfig = module.get_bin_path("ldconfig", opt_dirs=["/sbin", "/usr/sbin"])
    if not ldconfig:
        return []
    rc, out, dummy = module.run_command([ldconfig, "-p"], environ_update={"LANG": "C", "LC_ALL": "C"})
    if rc != 0:
        return []
    return [path for name, dummy_flags, path in parse_ldconfig_cache(out) if name == soname]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            packages=dict(type="list", elements="str", default=[]),
            required=dict(type="bool", default=True),
            prove_preload=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    soname = module.params["name"]
    if "/" in soname:
        module.fail_json(msg="name must be a file name such as libtcmalloc_minimal.so.4, not a path: %s" % soname)
    machine = normalize_machine(os.uname()[4])
    candidates = _package_file_candidates(module, module.params["packages"], soname)
    candidates += _ldconfig_candidates(module, soname)
    path, rejected = choose_library(soname, candidates, machine)
    if path is None:
        if module.params["required"]:
            module.fail_json(
                msg="No %s shared library named %s was found (searched packages %s and the ldconfig cache)."
                % (machine, soname, module.params["packages"]),
                rejected=rejected,
                machine=machine,
            )
        module.exit_json(changed=False, path=None, machine=machine, rejected=rejected)
    real_path = os.path.realpath(path)
    if module.params["prove_preload"]:
        dummy, maps, stderr = module.run_command([module.get_bin_path("cat", required=True), "/proc/self/maps"],
                                                 environ_update={"LD_PRELOAD": path, "LANG": "C", "LC_ALL": "C"})
        problem = preload_problem(path, real_path, maps, stderr)
        if problem:
            module.fail_json(msg=problem, path=path, real_path=real_path, machine=machine)
    module.exit_json(changed=False, path=path, real_path=real_path, machine=machine, rejected=rejected)


if __name__ == "__main__":
    main()
