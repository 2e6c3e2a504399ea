#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_survey
short_description: Read in one module run what the modules host_facts, host_ports, package_candidates and vllm_model_info read
version_added: 0.1.0
description:
  - The input_check action asks each host everything one check needs in one run of this module instead of one run
    of each of those modules (each run costs a round trip and a Python start on the host). Each answer is the one
    the module of that name gives, read by the same code (module_utils/host_survey.py).
  - Reads only, except what package_candidates may write, apt's package lists, refreshed when older than
    O(cache_valid_time) and a package is not installed.
options:
  facts:
    description: Read the host's CPUs, NUMA nodes and memory (what host_facts publishes as C(arm_inference_host)).
    type: bool
    default: false
  free_space_paths:
    description: With O(facts), the free bytes under each of these paths, for an unprivileged writer.
    type: list
    elements: path
    default: []
  ports:
    description: Read the TCP listeners and their holders, the lowest unprivileged port and the open files a service
      can get (host_ports' answer), and try binding O(addresses).
    type: bool
    default: false
  addresses:
    description: With O(ports), IP addresses to try binding; anything that is not an IP address is left out.
    type: list
    elements: str
    default: []
  packages:
    description: Package names to ask the package manager about (package_candidates' answer); not asked when omitted.
    type: list
    elements: str
  cache_valid_time:
    description: With O(packages), refresh apt's lists first when they are older than this many seconds and a name is
      not installed; 0 never refreshes.
    type: int
    default: 0
  model_paths:
    description: Model directories to summarize (vllm_model_info's answer); not read when omitted.
    type: list
    elements: path
  exists:
    description: Paths to look for (a link counts, as M(ansible.builtin.stat) without following it).
    type: list
    elements: path
    default: []
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Supports check mode (apt's lists are refreshed in it too, as package_candidates refreshes them).
"""

EXAMPLES = r"""
- name: Read the facts and the listeners in one run
  arm_inference.vllm.host_survey:
    facts: true
    ports: true
    addresses: [127.0.0.1]
  register: __survey
"""

RETURN = r"""
facts:
  description: The host's description, as host_facts publishes it in C(arm_inference_host).
  returned: with O(facts)
  type: dict
free_bytes:
  description: Free bytes under each of O(free_space_paths).
  returned: with O(facts)
  type: dict
ports:
  description: host_ports' answer (C(listening), C(addresses), C(unprivileged_port_start), C(service_open_files)).
  returned: with O(ports)
  type: dict
packages:
  description:
    - package_candidates' answer (C(packages), C(missing), C(manager), C(cache_updated), C(lists_age)), or
      C(failed) and C(msg) where the package manager could not answer (the survey itself does not fail then).
  returned: with O(packages)
  type: dict
model_info:
  description: vllm_model_info's answer (C(models), C(errors)).
  returned: with O(model_paths)
  type: dict
exists:
  description: Each of O(exists) to whether it is there.
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import host_survey
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import HostFactsError
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_tuning import TuningError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            facts=dict(type="bool", default=False),
            free_space_paths=dict(type="list", elements="path", default=[]),
            ports=dict(type="bool", default=False),
            addresses=dict(type="list", elements="str", default=[]),
            packages=dict(type="list", elements="str"),
            cache_valid_time=dict(type="int", default=0),
            model_paths=dict(type="list", elements="path"),
            exists=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    answer = {"exists": dict((path, os.path.lexists(path)) for path in params["exists"])}
    if params["facts"]:
        try:
            answer.update(host_survey.host_facts(free_space_paths=params["free_space_paths"]))
        except (HostFactsError, TuningError) as error:
            module.fail_json(msg="host_facts: could not read the host's CPUs and memory: %s" % error)
        for warning in answer["facts"]["warnings"]:
            module.warn(warning)
    if params["ports"]:
        answer["ports"] = host_survey.ports(params["addresses"])
    if params["packages"] is not None:
        try:
            answer["packages"] = host_survey.packages(module, params["packages"],
                                                      cache_valid_time=params["cache_valid_time"])
        except host_survey.PackageQueryError as error:
            answer["packages"] = {"failed": True, "msg": str(error)}
    if params["model_paths"] is not None:
        answer["model_info"] = host_survey.model_info(params["model_paths"])
    module.exit_json(changed=False, **answer)


if __name__ == "__main__":
    main()
