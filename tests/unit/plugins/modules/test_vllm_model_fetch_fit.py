"""vllm_model_fetch refuses a model that does not fit the host before the first byte is fetched.

A real HTTP origin (Python's http.server, on the loopback) serves a tiny model and a second revision whose
weights are a sparse 200 GB file: the origin announces its size, the module weighs it against the published
Graviton4 c8g.16xlarge sample (128 GiB, one NUMA node) and refuses it with the numbers, leaving the first
revision current and fetching nothing but the sizes (HEAD requests) and config.json."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

import published_samples
from http_origin import http_origin
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_info as info
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts
from model_fetch import run_module  # noqa: E402

HUGE = 200 * 10 ** 9
MID = 40 * 1024 ** 3  # fits the sample's node alone, not as one of four instances on it


@pytest.fixture()
def origin(tmp_path):
    root = tmp_path / "web"
    for revision, size in (("small", 4096), ("mid", MID), ("huge", HUGE)):
        (root / revision).mkdir(parents=True)
        (root / revision / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
        write_sparse_safetensors(root / revision / "model.safetensors", size)
    with http_origin(root) as server:
        yield root, server


def write_sparse_safetensors(path, size):
    """A safetensors file of size bytes: its header (one U8 tensor over the rest) and sparse data, so the size is
    announced and its header read (in staging) while no disk is used."""
    header = json.dumps({"w": {"dtype": "U8", "shape": [size - 136], "data_offsets": [0, size - 136]}}).encode()
    with open(path, "wb") as handle:
        handle.write((128).to_bytes(8, "little") + header.ljust(128))
        handle.truncate(size)


def _sums(directory):
    return dict((name, hashlib.sha256((directory / name).read_bytes()).hexdigest() if name == "config.json"
                 or os.path.getsize(directory / name) < 1 << 20 else "0" * 64)
                for name in ("config.json", "model.safetensors"))


def fit(**extra):
    return dict({"facts": build_host_facts(published_samples.load_sample("graviton4-c8g-16xlarge")),
                 "instances": [{"name": "main"}], "serve_model": "tiny", "kv_cache_min_gib": 1}, **extra)


def test_a_model_too_large_is_refused_before_the_download_and_the_previous_stays(capsys, tmp_path, origin):
    root, server = origin
    url = server.url
    store = tmp_path / "store"
    common = {"store": str(store), "name": "tiny", "keep": 2, "min_free_disk_gib": 0}
    placed = run_module(capsys, source=url + "/small/", revision="small", sha256=_sums(root / "small"),
                        fit=fit(), **common)
    assert placed.get("failed") is not True, placed
    assert placed["fit"][0]["checked"] is True and placed["fit"][0]["variable"] == "vllm_serve_instances[0] (main)"
    assert placed["fit"][0]["node_share_gib"] > 100
    server.requests.clear()

    refused = run_module(capsys, source=url + "/huge/", revision="huge", sha256=_sums(root / "huge"),
                         fit=fit(), **common)
    assert refused["failed"] is True
    message = refused["msg"]
    assert "\n" not in message
    assert message.startswith("vllm_serve_instances[0] (main): tiny at huge needs ")
    assert "weights 186.3 GiB / TP 1 + KV cache floor 1 GiB" in message
    assert "Nothing was fetched; the previous revision (small) stays current." in message
    # Only the sizes were asked for and config.json read (vllm_serve's rules run on it, and refuse it before the
    # weights' headers are asked for): no byte of the weights.
    assert sorted(server.requests) == [("GET", "/huge/config.json"), ("HEAD", "/huge/config.json"),
                                       ("HEAD", "/huge/model.safetensors")]
    assert not os.path.exists(store / "tiny" / ".staging-huge")
    assert os.readlink(store / "tiny" / "current") == "small"
    assert sorted(os.listdir(store / "tiny")) == [".state.json", "current", "small"]


def test_the_rerun_of_a_placed_revision_asks_the_origin_nothing(capsys, tmp_path, origin):
    root, server = origin
    url = server.url
    common = {"store": str(tmp_path / "store"), "name": "tiny", "source": url + "/small/", "revision": "small",
              "sha256": _sums(root / "small"), "min_free_disk_gib": 0}
    assert run_module(capsys, fit=fit(), **common)["changed"] is True
    server.requests.clear()
    again = run_module(capsys, fit=fit(), **common)
    assert again["changed"] is False and "fit" not in again
    assert server.requests == []


def test_the_layout_of_the_instances_that_name_the_model_is_what_is_weighed(capsys, tmp_path, origin):
    root, server = origin
    url = server.url
    facts = fit()["facts"]
    assert info.check_fit(facts, MID)["checked"] is True  # alone on the node, 40 GiB fits
    # Four instances share the sample's single NUMA node: each rank gets a quarter of it. The one that
    # serves another model counts too: it takes its share of the node.
    instances = [{"name": "a%d" % index} for index in range(3)] + [{"name": "other", "model": "/srv/other"}]
    refused = run_module(capsys, store=str(tmp_path / "store"), name="tiny", source=url + "/mid/", revision="mid",
                         sha256=_sums(root / "mid"), min_free_disk_gib=0, fit=fit(instances=instances))
    assert refused["failed"] is True, refused
    assert refused["msg"].startswith("vllm_serve_instances[0] (a0): tiny at mid needs 44.2 GiB per rank"), refused
    assert "previous revision (none) stays current" in refused["msg"]
    assert not os.path.exists(tmp_path / "store" / "tiny")
