"""role_contracts.contract(): what an owner publishes, computed from its variables (the role_contract lookup and
the owners' own <role>_contract facts both call it; tests/unit/roles/test_role_contracts.py checks the roles)."""

from __future__ import annotations

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import role_contracts

SERVE = {"_vllm_serve_config_dir": "/etc/vllm-serve", "_vllm_serve_unit_dir": "/etc/systemd/system",
         "_vllm_serve_marker": "# marker", "vllm_serve_venv_path": "/opt/vllm/current/venv",
         "vllm_serve_health_timeout": "900", "vllm_serve_user": "vllm-serve", "vllm_serve_group": "vllm-serve",
         "vllm_serve_instances": [{"name": "main"}], "vllm_serve_model": "", "vllm_serve_kv_cache_min_gib": 1,
         "vllm_serve_memory_headroom_gib": None}


def serve(**values):
    return role_contracts.contract("vllm_serve", dict(SERVE, **values))


def test_the_instances_are_published_as_their_layout_only():
    instances = [{"name": "a", "model": "llama", "tensor_parallel_size": 2, "port": 8100, "kv_cache_gib": 4,
                  "environment": {"HF_TOKEN": "hf_never_published"}, "extra_args": ["--api-key=secret"]},
                 {"name": "b", "dtype": "float32"}, {}]
    published = serve(vllm_serve_instances=instances)["instances"]
    # The dtype decides what vllm_model weighs the model at before its download.
    assert published == [{"name": "a", "model": "llama", "tensor_parallel_size": 2}, {"name": "b", "dtype": "float32"},
                         {}]
    assert "never_published" not in repr(published) and "secret" not in repr(published)
    assert instances[0]["environment"], "the owner's value is left as it is"


@pytest.mark.parametrize("instances", ["main", None, [{"name": "a"}, "b"]])
def test_instances_vllm_serve_would_refuse_are_passed_on_as_given(instances):
    # Its preflight names vllm_serve_instances; a consumer's fit check must not hide that.
    assert serve(vllm_serve_instances=instances)["instances"] == instances


@pytest.mark.parametrize("given,floor", [(1, 1), ("4", 4), (" 4 ", 4), ("lots", "lots"), (0, 0), ("2.5", "2.5")])
def test_the_kv_floor_is_the_integer_the_tuning_reads(given, floor):
    # 0 and 2.5 are refused by the tuning rules (a whole number of 1 or more): passed on for them to name.
    published = serve(vllm_serve_kv_cache_min_gib=given)["kv_cache_min_gib"]
    assert published == floor and type(published) is type(floor)


@pytest.mark.parametrize("given,headroom", [(None, None), ("", None), ("2.5", 2.5), (3, 3.0), ("-1", "-1")])
def test_the_headroom_is_the_number_the_tuning_reads_or_null_for_its_default(given, headroom):
    assert serve(vllm_serve_memory_headroom_gib=given)["memory_headroom_gib"] == headroom


def test_the_default_model_and_the_rest_are_published_as_given():
    published = serve(vllm_serve_model="llama")
    assert (published["default_model"], published["health_timeout"], published["group"]) == ("llama", 900, "vllm-serve")
    assert published["endpoints_file"] == "/etc/vllm-serve/endpoints.json"


def test_python_venv_publishes_its_package_sources():
    values = dict((name, "") for name in role_contracts.variables("python_venv"))
    values.update(python_venv_path="/opt/venv", python_venv_pip_index_url="https://u:p@mirror/simple",
                  python_venv_pip_extra_index_urls=["https://a/simple"], python_venv_pip_no_index=False)
    published = role_contracts.contract("python_venv", values)
    assert published["interpreter"] == "/opt/venv/bin/python"
    assert (published["pip_index_url"], published["pip_extra_index_urls"], published["pip_no_index"]) == (
        "https://u:p@mirror/simple", ["https://a/simple"], False)


def test_a_missing_variable_or_an_unknown_role_is_named():
    values = dict(SERVE)
    del values["vllm_serve_kv_cache_min_gib"]
    with pytest.raises(role_contracts.ContractError, match="vllm_serve_kv_cache_min_gib"):
        role_contracts.contract("vllm_serve", values)
    with pytest.raises(role_contracts.ContractError, match="tcmalloc publishes no contract"):
        role_contracts.variables("tcmalloc")
