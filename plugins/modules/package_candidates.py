#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: package_candidates
short_description: Report which packages the host's repositories can install
version_added: 0.1.0
description:
  - Asks the host's package manager (apt on Debian/Ubuntu, dnf on RHEL-family and Amazon Linux)
    whether each named package is installed or installable, without installing anything.
  - Roles call it in preflight so a package name derived from user input (for example
    C(python3.99-dev)) fails with a clear message before any package is installed.
  - The local package database (dpkg or rpm) answers for installed packages; the repositories are
    only asked about the others, so a host that already has everything is not queried (nor its
    package lists refreshed) at all.
  - Several runs on one host at once (inventory aliases of one machine, two playbooks) do not collide
    on apt's lock, nor refresh the lists twice; each holds a lock on apt's lists directory (flock, no
    file is created) while it decides whether to refresh and refreshes (exclusive), and while it asks
    C(apt-cache) (shared). apt-get does not wait for its own lock, so two refreshes at once would fail.
options:
  names:
    description: Package names to look up.
    type: list
    elements: str
    required: true
  cache_valid_time:
    description:
      - apt only. When some package is not installed and the newest package list is older than this
        many seconds (or there is none), run C(apt-get update) first so availability is judged on
        current lists. V(0) never refreshes.
      - The refresh happens in check mode too and is not reported as a change, because it alters no
        installed software or configuration. Unlike M(ansible.builtin.apt), nothing (such as
        C(python3-apt)) is installed to do it.
    type: int
    default: 0
  manager:
    description:
      - Package manager to ask. V(auto) picks apt when C(apt-cache) exists, else dnf.
    type: str
    choices: [auto, apt, dnf]
    default: auto
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Supports check mode. Apart from the optional apt list refresh it only reads.
"""

EXAMPLES = r"""
- name: Check that the requested Python headers exist in the repositories
  arm_inference.vllm.package_candidates:
    names: [python3.12-dev, python3.12-venv]
    cache_valid_time: 3600
  register: __candidates

- name: Fail when one is missing
  ansible.builtin.assert:
    that: __candidates.missing | length == 0
    fail_msg: "Not installable here: {{ __candidates.missing | join(', ') }}"
"""

RETURN = r"""
packages:
  description: Per package, whether it is available, the installed version, and (for packages not installed) the repositories' candidate.
  returned: always
  type: dict
  sample: {"python3.11-dev": {"available": true, "candidate": "3.11.2-6", "installed": null}}
missing:
  description: Names that are neither installed nor installable.
  returned: always
  type: list
  elements: str
  sample: ["python3.99-dev"]
cache_updated:
  description: Whether the apt package lists were refreshed.
  returned: always
  type: bool
  sample: false
lists_age:
  description:
    - apt only, when some package is not installed. Seconds since apt last wrote a package list
      (after the refresh, if there was one); V(null) when the host has no package lists at all (a
      fresh container or image before its first C(apt-get update)), so apt knows only installed
      packages and every other name is missing.
  returned: when the apt repositories were asked
  type: float
  sample: 1200.5
manager:
  description: The package manager that was asked.
  returned: always
  type: str
  sample: apt
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_survey import PackageQueryError, packages


def main():
    module = AnsibleModule(
        argument_spec=dict(
            names=dict(type="list", elements="str", required=True),
            manager=dict(type="str", default="auto", choices=["auto", "apt", "dnf"]),
            cache_valid_time=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    try:
        answer = packages(module, module.params["names"], module.params["manager"], module.params["cache_valid_time"])
    except PackageQueryError as error:
        module.fail_json(msg=str(error))
    module.exit_json(changed=False, **answer)


if __name__ == "__main__":
    main()
