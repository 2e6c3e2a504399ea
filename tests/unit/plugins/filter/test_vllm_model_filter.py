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


def test_the_tools_locks_and_their_requirements_as_venv_requirements_takes_them():
    from ansible_collections.arm_inference.vllm.plugins.filter.vllm_model import (
        vllm_model_lock_requirements, vllm_model_tool_locks)
    assert vllm_model_tool_locks({"huggingface_hub": "2.4.0", "boto3": "1.44.5"}) == [
        "huggingface_hub-2.4.0.txt", "boto3-1.44.5.txt"]
    one = "six==1.17.0 \\\n    --hash=sha256:%s\n" % ("a" * 64)
    two = "tomli==2.5.0 ; python_full_version < '3.11' \\\n    --hash=sha256:%s\n" % ("b" * 64)
    assert vllm_model_lock_requirements([one, one + two]) == ["six==1.17.0", "tomli==2.5.0 ; python_full_version < '3.11'"]
    with pytest.raises(AnsibleFilterError, match="vllm_model tools lock: not a hash-pinned requirement"):
        vllm_model_lock_requirements("six==1.17.0\n")
