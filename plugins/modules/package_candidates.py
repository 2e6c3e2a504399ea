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

import fcntl
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils.package_candidates import (
    apt_lists_age,
    not_installed,
    parse_apt_policy,
    parse_dpkg_installed,
    parse_rpm_query,
    summarize,
)


APT_LISTS = "/var/lib/apt/lists"
RPM_FORMAT = "%{name}\t%{evr}\n"


def _lock_apt_lists(exclusive):
    """A lock on apt's lists directory among this module's runs on the host (released when the
    descriptor closes); None when there is no such directory."""
    try:
        descriptor = os.open(APT_LISTS, os.O_RDONLY)
    except OSError:
        return None
    fcntl.flock(descriptor, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    return descriptor


def _refresh_apt(module, valid_time):
    if valid_time <= 0:
        return False
    # Decided under the lock: a run that waited for another's refresh finds the lists fresh.
    age = apt_lists_age(APT_LISTS, time.time())
    if age is not None and age < valid_time:
        return False
    apt_get = module.get_bin_path("apt-get", required=True)
    rc, dummy_out, err = module.run_command([apt_get, "update", "-q"], environ_update={"LANG": "C", "LC_ALL": "C"})
    if rc != 0:
        module.fail_json(msg="apt-get update failed: %s" % err.strip(), rc=rc)
    return True


def _installed_dpkg(module, names):
    dpkg_query = module.get_bin_path("dpkg-query", required=True)
    # dpkg-query exits 1 when a name is unknown to dpkg; its stdout still lists the known ones.
    dummy_rc, out, dummy_err = module.run_command(
        [dpkg_query, "-W", "-f", "${Package}\t${Version}\t${db:Status-Status}\n"] + names,
        environ_update={"LANG": "C", "LC_ALL": "C"},
    )
    return parse_dpkg_installed(out)


def _installed_rpm(module, names):
    rpm = module.get_bin_path("rpm", required=True)
    # rpm -q exits non-zero when any name is not installed; its stdout still lists the installed ones.
    dummy_rc, out, dummy_err = module.run_command([rpm, "-q", "--queryformat", RPM_FORMAT] + names)
    return parse_rpm_query("\n".join(line for line in out.splitlines() if "\t" in line))


def _candidates_apt(module, names):
    apt_cache = module.get_bin_path("apt-cache", required=True)
    rc, out, err = module.run_command([apt_cache, "policy"] + names, environ_update={"LANG": "C", "LC_ALL": "C"})
    if rc != 0:
        module.fail_json(msg="apt-cache policy failed: %s" % err.strip(), rc=rc)
    return {name: info["candidate"] for name, info in parse_apt_policy(out).items()}


def _candidates_dnf(module, names):
    dnf = module.get_bin_path("dnf", required=True)
    rc, out, err = module.run_command([dnf, "-q", "repoquery", "--latest-limit=1", "--queryformat", RPM_FORMAT] + names)
    if rc != 0:
        module.fail_json(msg="dnf repoquery failed: %s" % err.strip(), rc=rc)
    return parse_rpm_query(out)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            names=dict(type="list", elements="str", required=True),
            manager=dict(type="str", default="auto", choices=["auto", "apt", "dnf"]),
            cache_valid_time=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    names = [name for name in module.params["names"] if name]
    manager = module.params["manager"]
    if manager == "auto":
        manager = "apt" if module.get_bin_path("apt-cache") else "dnf"
    if not names:
        module.exit_json(changed=False, packages={}, missing=[], manager=manager, cache_updated=False)
    # The local package database answers for what is installed; the repositories (slow to ask,
    # and a list refresh slower still) are only consulted for the rest, so a re-run asks nothing.
    installed = (_installed_dpkg if manager == "apt" else _installed_rpm)(module, names)
    pending = not_installed(names, installed)
    cache_updated = False
    candidates = {}
    answer = {}
    if pending and manager == "apt":
        lock = _lock_apt_lists(exclusive=module.params["cache_valid_time"] > 0)
        try:
            cache_updated = _refresh_apt(module, module.params["cache_valid_time"])
            if lock is not None:
                fcntl.flock(lock, fcntl.LOCK_SH)  # the queries of other runs go on beside this one
            candidates = _candidates_apt(module, pending)
            answer["lists_age"] = apt_lists_age(APT_LISTS, time.time())
        finally:
            if lock is not None:
                os.close(lock)
    elif pending:
        candidates = _candidates_dnf(module, pending)
    packages, missing = summarize(names, candidates, installed)
    module.exit_json(changed=False, packages=packages, missing=missing, manager=manager, cache_updated=cache_updated,
                     **answer)


if __name__ == "__main__":
    main()
