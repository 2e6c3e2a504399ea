# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the vllm_benchmark role; the drawing lives in module_utils/vllm_load.py and each
filter is documented in the YAML file of the same name next to this one."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_load


def vllm_benchmark_svg(hosts):
    if not isinstance(hosts, dict):
        raise AnsibleFilterError("vllm_benchmark_svg expects a mapping of host to vllm_chat_load results, got %s"
                                 % type(hosts).__name__)
    try:
        return vllm_load.sweep_svg(hosts) or ""
    except (KeyError, TypeError, ValueError) as error:
        raise AnsibleFilterError("vllm_benchmark_svg: malformed vllm_chat_load results: %s" % error)


def vllm_benchmark_levels(concurrency):
    try:
        return vllm_load.concurrency_levels(concurrency)
    except ValueError as error:
        raise AnsibleFilterError("vllm_benchmark: %s" % error)


class FilterModule:
    def filters(self):
        return {"vllm_benchmark_svg": vllm_benchmark_svg, "vllm_benchmark_levels": vllm_benchmark_levels}
