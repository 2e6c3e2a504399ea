from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.arm_inference.vllm.plugins.filter.vllm_rollout import FilterModule, vllm_rollout_put_back

PLACED = {
    "tiny": {"path": "/var/lib/vllm-models/tiny/current", "revision": "bbb", "previous_revision": "aaa"},
    "same": {"path": "/var/lib/vllm-models/same/current", "revision": "ccc", "previous_revision": "ccc"},
    "first": {"path": "/var/lib/vllm-models/first/current", "revision": "ddd", "previous_revision": None},
}


def test_names_the_release_and_each_model_revision_the_run_had_switched():
    words = vllm_rollout_put_back({"before": "releases/r1", "after": "releases/r2", "placed": PLACED})
    assert words == ["the release r1 (this run had made r2 current)",
                     "model tiny at revision aaa (this run had made bbb current)"]


@pytest.mark.parametrize("before,after", [("releases/r1", "releases/r1"), ("", "releases/r1"), ("", "")])
def test_a_release_link_the_run_left_alone_or_created_is_not_named(before, after):
    assert vllm_rollout_put_back({"before": before, "after": after, "placed": {}}) == []


def test_a_release_link_the_run_removed_is_put_back():
    assert vllm_rollout_put_back({"before": "releases/r1", "after": None}) == [
        "the release r1 (this run had made none current)"]


@pytest.mark.parametrize("links", ["releases/r1", {"placed": ["tiny"]}])
def test_other_input_is_refused(links):
    with pytest.raises(AnsibleFilterError, match="vllm_rollout_put_back"):
        vllm_rollout_put_back(links)


def test_the_filter_is_registered():
    assert FilterModule().filters()["vllm_rollout_put_back"] is vllm_rollout_put_back
