# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter for the vllm_model role: its variables checked and its models normalized.

The rules live in module_utils/vllm_model_store.py; the filter is documented in vllm_model_check.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store


def vllm_model_check(variables):
    """The models of vllm_model_models, checked and normalized; tokens and S3 keys are replaced by has_token
    and has_s3_keys so the result can be looped over and shown without exposing them."""
    try:
        models = vllm_model_store.normalized_models(dict(variables))
    except vllm_model_store.ModelInputError as error:
        raise AnsibleFilterError(str(error))
    checked = []
    for model in models:
        entry = dict((key, value) for key, value in model.items()
                     if key not in ("token", "access_key_id", "secret_access_key"))
        entry["has_token"] = bool(model.get("token"))
        entry["has_s3_keys"] = bool(model.get("secret_access_key"))
        checked.append(entry)
    return checked


class FilterModule:
    def filters(self):
        return {"vllm_model_check": vllm_model_check}
