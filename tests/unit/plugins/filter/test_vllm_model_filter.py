"""vllm_model_check: the role's first task. It fails with the rule's one line and hides tokens."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.arm_inference.vllm.plugins.filter.vllm_model import vllm_model_check


def test_models_come_back_normalized_without_their_token():
    models = vllm_model_check({"vllm_model_models": [
        {"name": "gated", "source": "hf://org/gated", "revision": "main", "token": "hf_SECRET"},
        {"name": "pushed", "source": "controller:///models/tiny"}]})
    assert [(model["kind"], model["has_token"]) for model in models] == [("hf", True), ("controller", False)]
    assert "hf_SECRET" not in repr(models)


def test_bad_input_raises_the_rule_message():
    with pytest.raises(AnsibleFilterError, match=r"^vllm_model_keep: must be an integer of at least 1 \(got 0\); "):
        vllm_model_check({"vllm_model_models": [], "vllm_model_keep": 0})
