"""vllm_model_fetch runs vllm_serve's own rules on a revision's small files before any weight byte moves.

A real HTTP origin (Python's http.server on the loopback, recording every request) serves published checkpoints'
config.json and model.safetensors.index.json byte for byte (tests/unit/samples/models, README.md there) with sparse
shards of the sizes the index publishes: the module reads the small files, weighs the weights at the dtype
vllm_serve would serve them in on a published host sample, refuses what vllm_serve would refuse, and the origin's
log shows that no shard was asked for. The W4A8 config is the quantization_config form vLLM 0.32's parser reads as
INT4 W4A8 (no published one was reachable, see that README). Each case would have been placed (or, in check mode,
accepted) before this check: the fit check weighed the files at their size.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os

import pytest

import model_samples
import published_samples
from http_origin import http_origin
from stand_ins.hostile_http import hostile_origin
from model_fetch import run_module
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts

W4A8 = {"quant_method": "compressed-tensors", "format": "int-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"],
                                      "weights": {"type": "int", "num_bits": 4, "strategy": "channel",
                                                  "symmetric": True, "dynamic": False},
                                      "input_activations": {"type": "int", "num_bits": 8, "dynamic": True,
                                                            "strategy": "token", "symmetric": True}}}}


def facts(name, **cpu):
    host = build_host_facts(published_samples.load_sample(name))
    host = copy.deepcopy(host)
    host["cpu"].update(cpu)
    return host


def fit(host, instances=1):
    return {"facts": host, "instances": [{"name": "s%d" % index} for index in range(instances)],
            "serve_model": "llama", "kv_cache_min_gib": 1}


def publish(root, sample, shard_size=None, config=None):
    """A published sample in root: its JSON files as published (config replaced when given), its shards sparse at
    the sizes its index publishes (or shard_size). Returns the sha256 pins: real ones for the JSON files, zeros for
    the shards (never downloaded by these tests)."""
    model_samples.make_sample_dir(sample, root)
    if config is not None:
        (root / "config.json").write_text(json.dumps(config))
    pins = {}
    for name in sorted(os.listdir(root)):
        if name.endswith(".json"):
            pins[name] = hashlib.sha256((root / name).read_bytes()).hexdigest()
        else:
            if shard_size is not None:
                with open(root / name, "wb") as handle:
                    handle.truncate(shard_size)
            pins[name] = "0" * 64
    return pins


def weight_requests(server):
    """The requests for a shard's bytes beyond its 8-byte length and header: the module asks for the length, then
    exactly the header (Range requests, each checked against the header the shard starts with here)."""
    weights = []
    for method, path, asked in server.ranges:
        if method != "GET" or not path.endswith(".safetensors"):
            continue
        with open(server.root + path, "rb") as handle:
            header = int.from_bytes(handle.read(8), "little")
        if asked not in ("bytes=0-7", "bytes=0-%d" % (8 + header - 1)):
            weights.append((method, path, asked))
    return weights


@pytest.fixture()
def origin(tmp_path):
    with http_origin(tmp_path / "web") as server:
        yield tmp_path / "web", server


def test_bf16_weights_are_weighed_as_float32_on_a_cpu_without_bf16(capsys, tmp_path, origin):
    root, server = origin
    pins = publish(root / "llama", "llama-3.1-8b-bf16")
    # Altra Q80 (Neoverse-N1, no bf16), one 93 GiB node shared by three instances: 31 GiB each. The 15 GiB of bf16
    # files fit there; served as float32 (vllm_serve's dtype on this CPU) they take 29.9 GiB and do not.
    common = {"store": str(tmp_path / "store"), "name": "llama", "source": server.url + "/llama/",
              "revision": "r1", "sha256": pins, "min_free_disk_gib": 0, "_ansible_check_mode": True}
    refused = run_module(capsys, fit=fit(facts("altra-q80-1p"), instances=3), **common)
    assert refused.get("failed") is True, refused
    assert "\n" not in refused["msg"]
    assert refused["msg"].startswith("vllm_serve_instances[0] (s0): llama at r1 needs "), refused["msg"]
    assert "(weights 29.9 GiB / TP 1 + KV cache floor 1 GiB" in refused["msg"], refused["msg"]
    assert ("GET", "/llama/config.json") in server.requests
    assert weight_requests(server) == []
    # The same host with bf16: vllm_serve serves bfloat16, the weights take their 15 GiB and the model fits.
    server.requests.clear()
    accepted = run_module(capsys, fit=fit(facts("altra-q80-1p", bf16=True), instances=3), **common)
    assert accepted.get("failed") is not True, accepted
    assert accepted["fit"][0]["per_rank_gib"] < 21, accepted["fit"]


def test_an_instance_that_serves_float32_weighs_the_model_at_float32(capsys, tmp_path, origin):
    root, server = origin
    pins = publish(root / "llama", "llama-3.1-8b-bf16")
    host = facts("altra-q80-1p", bf16=True)
    layout = fit(host, instances=3)
    layout["instances"][1]["dtype"] = "float32"
    refused = run_module(capsys, store=str(tmp_path / "store"), name="llama", source=server.url + "/llama/",
                         revision="r1", sha256=pins, min_free_disk_gib=0, fit=layout, _ansible_check_mode=True)
    assert refused.get("failed") is True, refused
    assert refused["msg"].startswith("vllm_serve_instances[1] (s1): llama at r1 needs "), refused["msg"]
    assert weight_requests(server) == []


def test_a_published_bitsandbytes_checkpoint_is_refused_before_its_weights(capsys, tmp_path, origin):
    root, server = origin
    pins = publish(root / "bnb", "llama-3.1-8b-instruct-bnb-8bit", shard_size=4096)
    store = tmp_path / "store"
    refused = run_module(capsys, store=str(store), name="llama", source=server.url + "/bnb/", revision="r1",
                         sha256=pins, min_free_disk_gib=0, fit=fit(facts("graviton4-c8g-16xlarge")))
    assert refused.get("failed") is True, refused
    assert "\n" not in refused["msg"]
    assert refused["msg"].startswith("vllm_serve_instances[0] (s0).model: bitsandbytes checkpoints are not served "
                                     "by vLLM's CPU backend on Arm"), refused["msg"]
    assert "(got 'llama at r1')" in refused["msg"]
    assert weight_requests(server) == []
    assert not os.path.lexists(store / "llama" / "current")


@pytest.mark.parametrize("sample", ["x86_64-spr-2s", "x86_64-e5-2687w-v4"])
def test_a_w4a8_checkpoint_is_refused_on_x86_64_before_its_weights(capsys, tmp_path, origin, sample):
    root, server = origin
    config = json.loads((model_samples.MODELS_DIR / "llama-3.1-8b-bf16" / "config.json").read_text())
    pins = publish(root / "w4a8", "llama-3.1-8b-bf16", shard_size=4096, config=dict(config, quantization_config=W4A8))
    host = facts(sample)
    for node in host["numa_nodes"]:  # the E5 sample publishes no node memory: give it some, as the SPR has
        node["memory_mib"] = node["memory_mib"] or 262144
    refused = run_module(capsys, store=str(tmp_path / "store"), name="llama", source=server.url + "/w4a8/",
                         revision="r1", sha256=pins, min_free_disk_gib=0, fit=fit(host))
    assert refused.get("failed") is True, refused
    assert refused["msg"].startswith("vllm_serve_instances[0] (s0).model: INT4 W4A8 (compressed-tensors, int8 "
                                     "dynamic activations) checkpoints are not served by vLLM's CPU backend on "
                                     "x86_64"), refused["msg"]
    assert weight_requests(server) == []
    assert not os.path.lexists(tmp_path / "store" / "llama" / "current")


def _tiny(root, config=b'{"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}', index=None):
    root.mkdir(parents=True)
    (root / "config.json").write_bytes(config)
    files = {"config.json": config}
    if index is not None:
        (root / "model.safetensors.index.json").write_bytes(index)
        files["model.safetensors.index.json"] = index
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    weights = len(header).to_bytes(8, "little") + header + b"\0" * 4
    for name in ("model-00001-of-00002.safetensors",) if index is not None else ("model.safetensors",):
        (root / name).write_bytes(weights)
        files[name] = weights
    return dict((name, hashlib.sha256(data).hexdigest()) for name, data in files.items())


@pytest.mark.parametrize("config, problem", [
    (b'{"architectures": ["LlamaForCausalLM"], "architectures": []}', "config.json is not valid JSON (duplicate key"),
    (b'{"torch_dtype": NaN}', "config.json is not valid JSON (NaN is not JSON)"),
    (b'["LlamaForCausalLM"]', "config.json is not a JSON object (got list)"),
    (b'\xff\xfe{}', "config.json is not valid JSON ('utf-8' codec can't decode"),
    (b'{"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": ["x"]}}}',
     "config.json is not a model configuration vLLM reads (AttributeError"),
    (b'{"a": "' + b"x" * (4 * 1024 * 1024) + b'"}', "config.json is 4194313 bytes, more than the 4194304 a metadata"),
])
def test_a_hostile_config_is_refused_in_one_line_before_the_weights(capsys, tmp_path, origin, config, problem):
    root, server = origin
    pins = _tiny(root / "bad", config=config)
    store = tmp_path / "store"
    refused = run_module(capsys, store=str(store), name="tiny", source=server.url + "/bad/", revision="r1",
                         sha256=pins, min_free_disk_gib=0, fit=fit(facts("graviton4-c8g-16xlarge")))
    assert refused.get("failed") is True, refused
    assert "\n" not in refused["msg"] and len(refused["msg"]) < 600, refused["msg"]
    assert refused["msg"].startswith("vllm_model_models (tiny).source: tiny at r1: " + problem), refused["msg"]
    assert refused["msg"].endswith("nothing but its small files was fetched, the previous revision (none) stays "
                                   "current"), refused["msg"]
    assert weight_requests(server) == []
    assert not os.path.lexists(store / "tiny" / "r1")


@pytest.mark.parametrize("mode", ["cut", "lying", "gone"])
def test_a_small_file_whose_answer_breaks_is_refused_naming_the_source_once(capsys, tmp_path, mode):
    """The origin announces config.json and then breaks its answer (hangs up halfway, sends more than it announced,
    answers 404): one line naming the variable once (twice, on the old code, for a 404), nothing placed."""
    pins = _tiny(tmp_path / "web" / "broken")
    with hostile_origin(tmp_path / "web", {"broken/config.json": mode}) as server:
        refused = run_module(capsys, store=str(tmp_path / "store"), name="tiny", source=server.url + "/broken/",
                             revision="r1", sha256=pins, min_free_disk_gib=0, fit=fit(facts("graviton4-c8g-16xlarge")))
    assert refused.get("failed") is True, refused
    assert refused["msg"].startswith("vllm_model_models (tiny).source: "), refused["msg"]
    assert refused["msg"].count("vllm_model_models (tiny)") == 1, refused["msg"]
    assert "\n" not in refused["msg"] and "config.json" in refused["msg"], refused["msg"]
    assert not os.path.lexists(tmp_path / "store" / "tiny" / "current")


def test_a_config_that_differs_from_its_pin_is_refused_before_it_is_parsed(capsys, tmp_path, origin):
    root, server = origin
    pins = _tiny(root / "swapped")
    (root / "swapped" / "config.json").write_bytes(b'{"architectures": ["LlamaForCausalLM"], "torch_dtype":"float32"}')
    refused = run_module(capsys, store=str(tmp_path / "store"), name="tiny", source=server.url + "/swapped/",
                         revision="r1", sha256=pins, min_free_disk_gib=0, fit=fit(facts("graviton4-c8g-16xlarge")))
    assert refused.get("failed") is True, refused
    assert "config.json does not match the sha256 %s the source pins" % pins["config.json"] in refused["msg"]
    assert weight_requests(server) == []


def test_a_shard_the_index_names_but_the_checksums_leave_out_is_refused_before_the_weights(capsys, tmp_path, origin):
    root, server = origin
    index = json.dumps({"metadata": {"total_size": 8}, "weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}).encode()
    pins = _tiny(root / "partial", index=index)
    refused = run_module(capsys, store=str(tmp_path / "store"), name="tiny", source=server.url + "/partial/",
                         revision="r1", sha256=pins, min_free_disk_gib=0, fit=fit(facts("graviton4-c8g-16xlarge")))
    assert refused.get("failed") is True, refused
    assert ("tiny at r1 is incomplete: model.safetensors.index.json names model-00002-of-00002.safetensors, which "
            "is missing") in refused["msg"], refused["msg"]
    assert weight_requests(server) == []


def test_a_config_without_a_dtype_is_weighed_from_the_shards_headers_before_its_weights(capsys, tmp_path, origin):
    """A checkpoint whose config.json names no dtype: only its shards' headers say the tensors are bfloat16. On a CPU
    without bf16 they are served as float32 at twice their bytes: the headers, read before any weight byte, refuse it
    (weighed at file size it fitted: check mode accepted it and a run downloaded it, to refuse it in staging)."""
    root, server = origin
    config, dummy = model_samples.load("llama-3.1-8b-bf16")
    config = dict((key, value) for key, value in config.items() if key not in ("torch_dtype", "dtype"))
    pins = publish(root / "llama", "llama-3.1-8b-bf16", config=config)
    refused = run_module(capsys, store=str(tmp_path / "store"), name="llama", source=server.url + "/llama/",
                         revision="r1", sha256=pins, min_free_disk_gib=0, fit=fit(facts("altra-q80-1p"), instances=3),
                         _ansible_check_mode=True)
    assert refused.get("failed") is True, refused
    assert refused["msg"].startswith("vllm_serve_instances[0] (s0): llama at r1 needs "), refused["msg"]
    assert "(weights 29.9 GiB / TP 1 + KV cache floor 1 GiB" in refused["msg"], refused["msg"]
    shards = sorted(name for name in pins if name.endswith(".safetensors"))
    assert len(shards) == 4
    assert sorted(path for method, path, asked in server.ranges if method == "GET" and path.endswith(".safetensors")) == sorted(
        "/llama/" + name for name in shards for dummy in range(2))  # each: its length, then its header
    assert weight_requests(server) == []


def test_a_shard_header_that_claims_more_than_its_file_is_refused_before_its_weights(capsys, tmp_path, origin):
    """A hostile origin: one shard's header names tensor bytes beyond the size the origin announces for it."""
    root, server = origin
    pins = publish(root / "llama", "llama-3.1-8b-bf16")
    shard = root / "llama" / "model-00002-of-00004.safetensors"
    size = shard.stat().st_size
    header = json.dumps({"w": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}}).encode()
    with open(shard, "r+b") as handle:
        handle.write(len(header).to_bytes(8, "little") + header)
    refused = run_module(capsys, store=str(tmp_path / "store"), name="llama", source=server.url + "/llama/",
                         revision="r1", sha256=pins, min_free_disk_gib=0, fit=fit(facts("graviton4-c8g-16xlarge")))
    assert refused.get("failed") is True, refused
    assert refused["msg"].startswith("vllm_model_models (llama).source: llama at r1: model-00002-of-00004.safetensors "
                                     "names tensor bytes up to %d past its header" % size), refused["msg"]
    assert "nothing but its small files was fetched" in refused["msg"]
    assert weight_requests(server) == []
    assert not os.path.exists(tmp_path / "store" / "llama" / "current")
