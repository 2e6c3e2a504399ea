"""api_key_plan: where vLLM's key comes from, and when the role makes one of its own (the gateway in front)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.arm_inference.vllm.plugins.filter.vllm_serve import vllm_serve_api_key_plan
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_serve import api_key_plan

STORED, GENERATED = "/etc/vllm-serve/api_key", "/etc/vllm-serve/generated_api_key"


def plan(**settings):
    values = {"api_key": False, "api_key_file": "", "generate": "auto", "gateway_enabled": True,
              "generated_exists": False, "stored_path": STORED, "generated_path": GENERATED}
    values.update(settings)
    return api_key_plan(values)


def test_no_key_and_the_gateway_on_serves_with_a_generated_key():
    assert plan() == {"source": GENERATED, "generated": True, "remove": [STORED]}


def test_the_operators_key_wins_and_a_generated_one_goes():
    assert plan(api_key=True, generated_exists=True) == {"source": STORED, "generated": False, "remove": [GENERATED]}
    assert plan(api_key_file="/root/key", generated_exists=True) == {
        "source": "/root/key", "generated": False, "remove": [STORED, GENERATED]}


def test_an_operator_file_at_a_path_the_role_uses_is_never_removed():
    assert plan(api_key_file=STORED) == {"source": STORED, "generated": False, "remove": [GENERATED]}
    assert plan(api_key_file=GENERATED) == {"source": GENERATED, "generated": False, "remove": [STORED]}


def test_without_the_gateway_a_generated_key_stays_required_once_made():
    assert plan(gateway_enabled=False) == {"source": "", "generated": False, "remove": [STORED, GENERATED]}
    assert plan(gateway_enabled=False, generated_exists=True) == {
        "source": GENERATED, "generated": True, "remove": [STORED]}


def test_never_serves_without_a_key_and_removes_a_generated_one():
    for exists in (False, True):
        assert plan(generate="never", generated_exists=exists) == {
            "source": "", "generated": False, "remove": [STORED, GENERATED]}
    assert plan(generate="never", api_key=True)["source"] == STORED


@pytest.mark.parametrize("value", ["always", "", None, True])
def test_a_bad_setting_is_named(value):
    with pytest.raises(AnsibleFilterError) as error:
        vllm_serve_api_key_plan({"generate": value, "stored_path": STORED, "generated_path": GENERATED})
    assert str(error.value).startswith("vllm_serve_api_key_generate: must be one of auto, never (got ")
    assert str(error.value).endswith("; set it to auto or never")
