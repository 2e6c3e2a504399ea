# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The contract a role publishes, where that role has not run; the logic is in module_utils/role_contracts.py."""

from __future__ import annotations

DOCUMENTATION = r"""
name: role_contract
version_added: 0.1.0
short_description: What a role of this collection publishes for the others, where it has not run
description:
  - Returns the contract of the named role (docs/architecture.md), the same dict that role sets as the fact
    C(<role>_contract) when it runs.
  - Each value is the variable in scope (inventory, extra vars, play vars) when set, else the owning role's own
    C(defaults/main.yml) or C(vars/main.yml); consumers use it as C(<role>_contract | default(lookup(...))) so that
    they never copy the owner's literals.
options:
  _terms:
    description: Owning roles, C(vllm_serve), C(vllm_build), C(python_venv), C(vllm_gateway), C(vllm_model) or C(vllm_autotune).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Show where vllm_serve records its endpoints
  ansible.builtin.debug:
    msg: "{{ (vllm_serve_contract | default(lookup('arm_inference.vllm.role_contract', 'vllm_serve'))).endpoints_file }}"
"""

RETURN = r"""
_raw:
  description:
    - One dict per role. C(vllm_serve) has C(config_dir), C(unit_dir), C(unit_pattern), C(marker), C(endpoints_file),
      C(venv_path), C(python), C(health_timeout), C(user), C(group), C(instances) (each instance's C(name), C(model)
      and C(tensor_parallel_size) where it sets them), C(default_model), C(kv_cache_min_gib) and
      C(memory_headroom_gib) (numbers, or null for the default headroom); C(vllm_build) has C(root), C(current) and
      C(current_venv); C(python_venv) has C(path), C(interpreter), C(user), C(group) and its package sources
      C(pip_index_url), C(pip_extra_index_urls), C(pip_find_links), C(pip_no_index), C(pip_trusted_hosts),
      C(pip_ca_bundle) and C(pip_timeout) (index URLs may carry credentials); C(vllm_gateway) has C(enabled) and
      C(endpoints_file); C(vllm_model) has C(store); C(vllm_autotune) has C(output_dir).
  type: list
  elements: dict
"""

import copy
import functools
from pathlib import Path

import yaml
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible.template import trust_as_template
from ansible_collections.arm_inference.vllm.plugins.module_utils import role_contracts

ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"


def owner_values(role, names=None):
    """The role's own defaults/main.yml and vars/main.yml (only `names` when given), the vars winning as they do in
    a play. A copy of what was parsed: the files are read again only when they change (a play templates a contract
    for every task that names it, on every host; parsing the two files each time cost about 50 ms of controller
    CPU)."""
    files = tuple((str(path), path.stat().st_mtime_ns if path.is_file() else None)
                  for path in (ROLES_DIR / role / part / "main.yml" for part in ("defaults", "vars")))
    parsed = _parsed(files)
    return copy.deepcopy(parsed if names is None else dict((name, parsed[name]) for name in names if name in parsed))


@functools.lru_cache(maxsize=64)
def _parsed(files):
    values = {}
    for path, mtime in files:
        if mtime is not None:
            with open(path) as handle:
                values.update(yaml.safe_load(handle) or {})
    return values


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        variables = variables or {}
        results = []
        for role in terms:
            try:
                names = role_contracts.variables(role)
                own = owner_values(role, names)
                values = {}
                for name in names:
                    if name in variables:
                        values[name] = self._templar.template(variables[name])
                    elif isinstance(own.get(name), str) and "{{" in own[name]:
                        # The owner's default derives from another contract (the collection's own files).
                        values[name] = self._templar.template(trust_as_template(own[name]))
                    elif name in own:
                        values[name] = own[name]
                results.append(role_contracts.contract(role, values))
            except role_contracts.ContractError as error:
                raise AnsibleLookupError("role_contract: %s" % error)
        return results
