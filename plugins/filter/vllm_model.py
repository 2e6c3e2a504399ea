# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the vllm_model role: its variables checked and its models normalized; the host that seeds a mirror;
the tools venv's hash-pinned locks and their requirements.

The rules live in module_utils/vllm_model_store.py; each filter is documented in its own .yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store


def vllm_model_check(variables):
    """The models of vllm_model_models, checked and normalized; tokens, S3 keys and HTTP headers are replaced by
    has_token, has_s3_keys and has_headers so the result can be looped over and shown without exposing them."""
    try:
        models = vllm_model_store.normalized_models(dict(variables))
    except vllm_model_store.ModelInputError as error:
        raise AnsibleFilterError(str(error))
    checked = []
    for model in models:
        entry = dict((key, value) for key, value in model.items()
                     if key not in ("token", "access_key_id", "secret_access_key", "headers"))
        entry["has_token"] = bool(model.get("token"))
        entry["has_s3_keys"] = bool(model.get("secret_access_key"))
        entry["has_headers"] = bool(model.get("headers"))
        checked.append(entry)
    return checked


def vllm_model_seeder(statuses, writer="", name=None):
    """The host that seeds a model's mirror, from {host: its status result} in play order: none ("") when every
    host holds the revision its source leads to; else the writer (vllm_model_mirror_writer, the only host that may
    write the mirror) when it is among them, whether it holds the revision (it uploads it from its store) or not
    (it takes it from the mirror or the origin); else, the writer not in this batch, a host that only reads the
    mirror: the first that holds a revision, else the first host. With name, a host whose last status is another
    model's (it does not declare this one) is left out."""
    if not isinstance(statuses, dict):
        raise AnsibleFilterError("vllm_model_seeder expects {host: status result}, got %s" % type(statuses).__name__)
    if name is not None:
        statuses = dict((host, status) for host, status in statuses.items()
                        if not isinstance(status, dict) or status.get("name") in (None, name))
    needed = [host for host, status in statuses.items() if not isinstance(status, dict) or status.get("needed", True)]
    if not needed:
        return ""
    if writer in statuses:
        return writer
    holders = [host for host in statuses if host not in needed]
    return (holders or needed)[0]


def vllm_model_tool_locks(pins):
    """The lock file names (the role's files/tools/) of the tools venv's {client: version}."""
    if not isinstance(pins, dict):
        raise AnsibleFilterError("vllm_model_tool_locks expects {client: version}, got %s" % type(pins).__name__)
    return vllm_model_store.tool_lock_files(pins)


def vllm_model_lock_requirements(texts):
    """The `name==version[ ; marker]` lines of hash-pinned locks (their texts), each once, in order: what the tools
    venv must hold, for venv_requirements to compare with what it holds."""
    if isinstance(texts, str):
        texts = [texts]
    requirements = []
    for text in texts:
        try:
            entries = vllm_model_store.lock_requirements(text)
        except ValueError as error:
            raise AnsibleFilterError("vllm_model tools lock: %s" % error)
        requirements.extend(entry["requirement"] for entry in entries if entry["requirement"] not in requirements)
    return requirements


class FilterModule:
    def filters(self):
        return {"vllm_model_check": vllm_model_check, "vllm_model_seeder": vllm_model_seeder,
                "vllm_model_tool_locks": vllm_model_tool_locks,
                "vllm_model_lock_requirements": vllm_model_lock_requirements}
