#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: input_check
short_description: Check roles' variables and the host against every rule, before anything changes
version_added: 0.1.0
description:
  - For each role named, checks the host's OS and architecture, each of the role's variables against
    its argument spec (types, choices, list elements), then every cross-variable and host-dependent
    rule of the role (plugins/module_utils/input_rules.py; the table is docs/input-rules.md).
  - "Fails with one line per problem, C(<variable>: <what is wrong> (got <value>); <what to do>);
    secrets (argument spec C(no_log) options, the API key) are never shown."
  - Reads the host's CPUs and memory (M(arm_inference.vllm.host_facts)) when the host facts are not
    gathered yet, and the free disk under the build root when vllm_build is checked.
  - When build_deps, tcmalloc, python_venv or an enabled vllm_gateway (C(vllm_gateway_enabled)) is
    checked, asks the host's package manager once (M(arm_inference.vllm.package_candidates)) whether
    every OS package those roles would install is installed or installable, and reports a missing one
    under the setting that asks for it. apt's package lists are refreshed first when they are older than
    the shortest C(*_apt_cache_valid_time) of those roles (or missing), as the first of them would
    refresh them before installing; that is the only thing the check may write on the host, and it is
    not reported as a change.
  - This is an action plugin; it runs on the controller, so controller paths (a CA bundle, an archive)
    are checked where they are read.
options:
  roles:
    description: Roles of this collection whose variables are checked.
    type: list
    elements: str
    required: true
  context:
    description: What the OS message starts with (the role or play that asks).
    type: str
    default: preflight
author:
  - Arm Inference maintainers (@arm-inference)
"""

EXAMPLES = r"""
- name: Check every role of the run before any host changes
  arm_inference.vllm.input_check:
    roles: [build_deps, tcmalloc, python_venv, vllm_build, vllm_serve]
"""

RETURN = r"""
errors:
  description: One line per problem found (C(msg) has them all on one line).
  returned: when more than one problem is found
  type: list
  elements: str
model_info:
  description:
    - What M(arm_inference.vllm.vllm_model_info) read of the local models vllm_serve's instances serve
      (placed by vllm_model or absolute paths), when vllm_serve is checked and there are such models.
  returned: when read
  type: dict
packages_to_install:
  description:
    - Per role checked among build_deps, tcmalloc, python_venv and an enabled vllm_gateway, the OS packages
      it installs that the host does not have yet, in the role's order (what its install step installs).
  returned: when one of those roles is checked and every rule holds
  type: dict
  sample: {"tcmalloc": ["libtcmalloc-minimal4"], "python_venv": []}
ansible_facts:
  description: C(arm_inference_host), the host's CPUs, NUMA nodes and memory, when the check read them.
  returned: when vllm_build or vllm_serve is checked
  type: dict
"""
