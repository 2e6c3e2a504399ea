# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the vllm_build role: build identity, release names and wheel-cache keys.

The rules live in module_utils/vllm_build.py; each filter is documented in the YAML file of the
same name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build


def vllm_build_identity(inputs):
    return vllm_build.build_identity(inputs)


def vllm_build_release_name(label, identity):
    return vllm_build.release_name(label, identity)


def vllm_build_cache_key(stamp):
    return vllm_build.wheel_cache_key(stamp)


def vllm_build_builders(hosts, identities, compile_needed):
    return vllm_build.elect_builders(list(hosts), list(identities), list(compile_needed))


def vllm_build_record(value):
    return vllm_build.build_record(value)


def _wrap(function):
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except vllm_build.BuildError as error:
            raise AnsibleFilterError(str(error))
    wrapper.__name__ = function.__name__
    return wrapper


class FilterModule:
    def filters(self):
        functions = (vllm_build_identity, vllm_build_release_name, vllm_build_cache_key, vllm_build_builders,
                     vllm_build_record)
        return dict((function.__name__, _wrap(function)) for function in functions)
