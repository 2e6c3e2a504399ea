"""vllm_model_fetch checks a revision as vLLM will read it, in staging, before it becomes current: config.json, and
every shard the checkpoint index's weight_map names. A hostile HTTP origin whose SHA256SUMS leaves a shard out, a hub
model whose include leaves one out (the real huggingface_hub client against tests/stand_ins/hub_server.py) and an index
naming a shard outside the model directory are each refused naming the model, the revision and the shard; the previous
revision stays current and no staging is left. On the old code each incomplete revision was verified and made
current."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as rules
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_model_store import ModelStoreError

from http_origin import http_origin
from stand_ins.hub_server import HubProcess
from stand_ins.tiny_model import write_tiny_model
from model_fetch import run_module  # noqa: E402

SHARD = "model-00002-of-00002.safetensors"
OLD = "1" * 40
NEW = "2" * 40


def write_sums(directory, leave_out=()):
    names = sorted(name for name in os.listdir(directory) if name != "SHA256SUMS" and name not in leave_out)
    lines = ["%s  %s\n" % (hashlib.sha256(open(os.path.join(directory, name), "rb").read()).hexdigest(), name)
             for name in names]
    with open(os.path.join(directory, "SHA256SUMS"), "w") as handle:
        handle.write("".join(lines))


def assert_previous_stays(model_dir, previous):
    assert os.readlink(os.path.join(model_dir, "current")) == previous
    assert sorted(os.listdir(model_dir)) == sorted([".state.json", "current", previous])


def test_a_hostile_origin_leaving_out_a_shard_is_refused_before_the_switch(capsys, tmp_path):
    """The origin's SHA256SUMS (the checksums the host trusts) lists every file of the new revision but one shard the
    index names: every file it lists verifies, and the revision is still refused."""
    root = tmp_path / "origin"
    write_sums(write_tiny_model(str(root / "v1"), seed=71))
    write_sums(write_tiny_model(str(root / "v2"), seed=72, shards=2), leave_out=(SHARD,))
    store = tmp_path / "store"
    with http_origin(root) as origin:
        def place(label):
            return run_module(capsys, store=str(store), name="tiny", source="%s/%s/" % (origin.url, label),
                              sha256sums="SHA256SUMS", min_free_disk_gib=0)

        first = place("v1")
        assert first.get("failed") is not True, first
        refused = place("v2")
    assert refused.get("failed"), refused
    assert refused["msg"].startswith("tiny: revision sha256-"), refused["msg"]
    assert ("is incomplete: model.safetensors.index.json names 1 shard(s) it does not hold (got missing %s); "
            % SHARD) in refused["msg"], refused["msg"]
    assert refused["msg"].endswith("the previous revision (%s) stays current" % first["revision"]), refused["msg"]
    assert "\n" not in refused["msg"]
    assert_previous_stays(store / "tiny", first["revision"])


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    write_tiny_model(str(root / "org" / "sharded" / OLD), seed=73, shards=2)
    write_tiny_model(str(root / "org" / "sharded" / NEW), seed=74, shards=2)
    (root / "org" / "sharded" / "refs.json").write_text(json.dumps({"main": NEW}))
    server = HubProcess(root).start()
    yield server
    server.stop()


def test_an_include_leaving_out_a_shard_is_refused_and_the_previous_commit_stays(capsys, tmp_path, hub):
    store = tmp_path / "store"
    args = {"store": str(store), "name": "sharded", "source": "hf://org/sharded", "endpoint": hub.endpoint,
            "min_free_disk_gib": 0}
    first = run_module(capsys, **dict(args, revision=OLD))
    assert first.get("failed") is not True, first
    assert sorted(os.listdir(store / "sharded" / "current")) == [
        "config.json", "model-00001-of-00002.safetensors", SHARD, "model.safetensors.index.json",
        "tokenizer_config.json"]
    refused = run_module(capsys, **dict(args, revision="main", include=["*.json", "model-00001-*"]))
    assert refused.get("failed"), refused
    assert refused["msg"] == (
        "sharded: revision %s is incomplete: model.safetensors.index.json names 1 shard(s) it does not hold (got "
        "missing %s); include every shard in the checksums or patterns; the previous revision (%s) stays current"
        % (NEW, SHARD, OLD)), refused["msg"]
    assert_previous_stays(store / "sharded", OLD)


@pytest.mark.parametrize("index, words", [
    ({"weight_map": {"a": "../../escape.safetensors"}}, "model.safetensors.index.json weight_map: names a file outside "
                                                        "the model directory"),
    ({"weight_map": ["model.safetensors"]}, "model.safetensors.index.json has no weight_map"),
    ("[not json", "model.safetensors.index.json is not valid JSON"),
])
def test_a_hostile_index_is_refused(tmp_path, index, words):
    directory = write_tiny_model(str(tmp_path / "model"), seed=75)
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as handle:
        handle.write(index if isinstance(index, str) else json.dumps(index))
    with pytest.raises(ModelStoreError) as refused:
        rules.check_complete(directory, "v1")
    assert str(refused.value).startswith("revision v1: " + words), str(refused.value)
    assert not (tmp_path / "escape.safetensors").exists()


def test_a_revision_without_config_is_refused_and_a_complete_one_passes(tmp_path):
    directory = write_tiny_model(str(tmp_path / "model"), seed=76, shards=3)
    rules.check_complete(directory, "v1")
    os.unlink(os.path.join(directory, "config.json"))
    with pytest.raises(ModelStoreError, match=r"^revision v1 is incomplete: it has no config.json, which vLLM reads "
                                              r"first \(got \["):
        rules.check_complete(directory, "v1")
