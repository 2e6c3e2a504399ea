# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn ansible_facts.arm_inference_host (module host_facts) into vLLM settings.

The rules live in module_utils/vllm_tuning.py; these wrappers only turn its errors into Ansible's.
Each filter is documented in the YAML file of the same name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_tuning

_REQUIRED = ("architecture", "cpu", "cpus", "numa_nodes", "memory")


def _checked(host):
    if not isinstance(host, dict) or any(key not in host for key in _REQUIRED):
        raise AnsibleFilterError(
            "vLLM tuning filters take ansible_facts.arm_inference_host: run arm_inference.vllm.host_facts first")
    return host


def _wrap(function):
    def wrapper(host, *args, **kwargs):
        try:
            return function(_checked(host), *args, **kwargs)
        except vllm_tuning.TuningError as error:
            raise AnsibleFilterError(str(error))
    wrapper.__name__ = function.__name__
    return wrapper


def vllm_serve_profile(host, instances=None, reserved_cpus_per_rank=None, kv_cache_min_gib=1, memory_headroom_gib=None):
    return vllm_tuning.serve_profile(host, instances, reserved_cpus_per_rank, kv_cache_min_gib, memory_headroom_gib)


def vllm_tensor_parallel_size(host, instances=1, override=None):
    return vllm_tuning.tensor_parallel_size(host, instances, override)


def vllm_max_jobs(host, gib_per_job=2, override=None):
    return vllm_tuning.max_jobs(host, gib_per_job, override)


def vllm_acl_build_jobs(host, build_jobs, gib_per_job=2, environment=None):
    return vllm_tuning.acl_build_jobs(host, build_jobs, gib_per_job, environment)


def vllm_dtype(host, override=None):
    return vllm_tuning.dtype(host, override)


def vllm_fpmath_mode(host, override=None):
    return vllm_tuning.fpmath_mode(host, override)


def vllm_build_class(host):
    return vllm_tuning.build_class(host)


class FilterModule:
    def filters(self):
        functions = (vllm_serve_profile, vllm_tensor_parallel_size, vllm_max_jobs, vllm_acl_build_jobs, vllm_dtype,
                     vllm_fpmath_mode, vllm_build_class)
        return dict((function.__name__, _wrap(function)) for function in functions)
