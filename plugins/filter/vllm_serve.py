# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter behind the vllm_serve role's templates; the logic is in module_utils/vllm_serve.py and the
documentation in vllm_serve_units.yml next to this file."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_serve

_REQUIRED = ("architecture", "cpu", "cpus", "numa_nodes", "memory")


def _units(host, instances, settings, name):
    if not isinstance(host, dict) or any(key not in host for key in _REQUIRED):
        raise AnsibleFilterError(
            "%s takes ansible_facts.arm_inference_host: run arm_inference.vllm.host_facts first" % name)
    try:
        return vllm_serve.serve_units(host, instances, settings)
    except vllm_serve.ServeError as error:
        raise AnsibleFilterError(str(error))


def vllm_serve_units(host, instances, settings=None):
    return vllm_serve.public_units(_units(host, instances, settings, "vllm_serve_units"))


def vllm_serve_environment_lines(host, instances, settings=None):
    return vllm_serve.environment_files(_units(host, instances, settings, "vllm_serve_environment_lines"))


def vllm_serve_api_key_plan(settings):
    try:
        return vllm_serve.api_key_plan(settings)
    except vllm_serve.ServeError as error:
        raise AnsibleFilterError(str(error))


class FilterModule:
    def filters(self):
        return {"vllm_serve_units": vllm_serve_units, "vllm_serve_environment_lines": vllm_serve_environment_lines,
                "vllm_serve_api_key_plan": vllm_serve_api_key_plan}
