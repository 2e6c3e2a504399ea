# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters behind the vllm_gateway role's tasks and templates; the logic is in
module_utils/vllm_gateway.py and each filter's documentation in the .yml file of its name."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_gateway


def _wrap(function):
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except (vllm_gateway.GatewayError, KeyError, TypeError) as error:
            raise AnsibleFilterError("%s: %s" % (function.__name__, error))
    wrapper.__name__ = function.__name__
    return wrapper


class FilterModule:
    def filters(self):
        return {
            "vllm_gateway_config": _wrap(vllm_gateway.gateway_config),
            "vllm_gateway_client_map": _wrap(vllm_gateway.client_key_map),
            "vllm_gateway_certificate_names": _wrap(vllm_gateway.certificate_names),
            "vllm_gateway_file_sd": _wrap(vllm_gateway.file_sd_targets),
            "vllm_gateway_endpoint": _wrap(vllm_gateway.gateway_endpoint),
        }
