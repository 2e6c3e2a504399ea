# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a role publishes for the other roles: each value has one owner (docs/architecture.md).

CONTRACTS names, per owning role, each published entry and the owner's variable it is read from (a
public default or an internal var of the owner's vars/main.yml); contract() adds what follows from
them. The owner sets the result as the fact <role>_contract when it runs (vllm_serve, python_venv); the role_contract
lookup computes the same from the owner's own files and the variables in scope where the owner has not run
(a play of its own, or a consumer that runs before it). Consumers read only these entries, never a
copy of the owner's literals.
"""

from __future__ import annotations

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_tuning
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_serve import UNIT_PREFIX

# What other roles may know of each vllm_serve instance: enough to lay its ranks out on the host's NUMA
# nodes and to weigh its model at the dtype it serves it in (vllm_model's fit check), never its environment or
# arguments, which may carry credentials.
INSTANCE_LAYOUT_KEYS = ("name", "model", "tensor_parallel_size", "dtype")

CONTRACTS = {
    # The units it writes (found by their marker line), its configuration directory, the venv it
    # serves from, how long it waits for /health, and the account the servers run as. What the
    # instances serve and how they share the host's memory: the instances' layout, the model an
    # instance without one serves, the KV cache floor and the headroom.
    "vllm_serve": {
        "config_dir": "_vllm_serve_config_dir",
        "unit_dir": "_vllm_serve_unit_dir",
        "marker": "_vllm_serve_marker",
        "venv_path": "vllm_serve_venv_path",
        "health_timeout": "vllm_serve_health_timeout",
        "user": "vllm_serve_user",
        "group": "vllm_serve_group",
        "instances": "vllm_serve_instances",
        "default_model": "vllm_serve_model",
        "kv_cache_min_gib": "vllm_serve_kv_cache_min_gib",
        "memory_headroom_gib": "vllm_serve_memory_headroom_gib",
    },
    # Whether the host has a front door, and the endpoints file that lists it (clients such as
    # smoke.yml go through it when it is enabled).
    "vllm_gateway": {
        "enabled": "vllm_gateway_enabled",
        "endpoints_file": "_vllm_gateway_endpoints_file",
    },
    # Where releases live (releases/<name>/ with its venv, the current link).
    "vllm_build": {
        "root": "vllm_build_root",
    },
    # Where autotune.yml keeps its results on the controller (<dir>/<class>/<model>.yml, read back by
    # vllm_serve to apply them).
    "vllm_autotune": {
        "output_dir": "vllm_autotune_output_dir",
    },
    # The model store (<store>/<name>/<revision>, a current link per model), for the vllm_model_fetch
    # module's activate action (vllm_rollout's rollback).
    "vllm_model": {
        "store": "vllm_model_store",
    },
    # The venv that builds vLLM and the account that owns it; the collection's package sources, which
    # every pip run of the collection uses (index URLs may carry credentials: the fact is set no_log).
    "python_venv": {
        "path": "python_venv_path",
        "user": "python_venv_user",
        "group": "python_venv_group",
        "pip_index_url": "python_venv_pip_index_url",
        "pip_extra_index_urls": "python_venv_pip_extra_index_urls",
        "pip_find_links": "python_venv_pip_find_links",
        "pip_no_index": "python_venv_pip_no_index",
        "pip_trusted_hosts": "python_venv_pip_trusted_hosts",
        "pip_ca_bundle": "python_venv_pip_ca_bundle",
        "pip_timeout": "python_venv_pip_timeout",
    },
}


class ContractError(ValueError):
    """A role has no contract, or a value it is read from is missing."""


def variables(role):
    """The owner's variables a contract reads (its CONTRACTS entry's values)."""
    if role not in CONTRACTS:
        raise ContractError("%s publishes no contract; roles that do: %s" % (role, ", ".join(sorted(CONTRACTS))))
    return sorted(set(CONTRACTS[role].values()))


def contract(role, values):
    """role's published contract from values ({variable: value} for every name variables(role) lists)."""
    missing = [name for name in variables(role) if name not in values]
    if missing:
        raise ContractError("%s's contract needs %s" % (role, ", ".join(missing)))
    published = {key: values[name] for key, name in CONTRACTS[role].items()}
    if role == "vllm_serve":
        published["health_timeout"] = int(published["health_timeout"])
        published["unit_pattern"] = UNIT_PREFIX + "*.service"
        published["endpoints_file"] = published["config_dir"].rstrip("/") + "/endpoints.json"
        published["python"] = published["venv_path"].rstrip("/") + "/bin/python"
        published["instances"] = instance_layouts(published["instances"])
        published["kv_cache_min_gib"] = _as_the_rules_read(
            vllm_tuning.positive_int, published["kv_cache_min_gib"], "vllm_serve_kv_cache_min_gib")
        headroom = published["memory_headroom_gib"]
        published["memory_headroom_gib"] = None if headroom in (None, "") else _as_the_rules_read(
            vllm_tuning.number, headroom, "vllm_serve_memory_headroom_gib")
    elif role == "vllm_build":
        published["current"] = published["root"].rstrip("/") + "/current"
        published["current_venv"] = published["current"] + "/venv"
    elif role == "vllm_gateway":
        enabled = published["enabled"]
        published["enabled"] = enabled.strip().lower() in ("true", "yes", "on", "1") if isinstance(enabled, str) \
            else bool(enabled)
    elif role == "python_venv":
        published["interpreter"] = published["path"].rstrip("/") + "/bin/python"
    return published


def instance_layouts(instances):
    """vllm_serve_instances reduced to INSTANCE_LAYOUT_KEYS, keys left out as the instance leaves them out
    (vllm_serve's defaults apply to them). A value vllm_serve would refuse is passed on as it is: its
    preflight names the variable."""
    if not isinstance(instances, list):
        return instances
    return [dict((key, item[key]) for key in INSTANCE_LAYOUT_KEYS if key in item) if isinstance(item, dict) else item
            for item in instances]


def _as_the_rules_read(convert, value, variable):
    """A number as vllm_serve's tuning rules read it (inventory and -e values may be strings), or the value as
    given where they would refuse it: the consumer's check then names the variable."""
    try:
        return convert(value, variable)
    except vllm_tuning.TuningError:
        return value
