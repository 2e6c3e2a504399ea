"""vllm_model_fetch action reach: the preflight's question to a host, before any host changes, whether it can place
its model. Against the hub stand-in (tests/stand_ins/hub_server.py, the real hub being unreachable here) with the real
huggingface_hub client and without it (a fresh host: no tools venv yet, so the hub's API over plain HTTPS), a real HTTP
origin, and an S3 endpoint without boto3. Every answer from the network is hostile input: a commit that is a path, a
file without a checksum, are refused here as placing refuses them. Nothing is ever written to the store, whatever the
check mode; a revision the host holds needs no network. On the old code there was no such question: the first sign of
an unreachable hub was vllm_model's failure, after every role before it had changed the host."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys

import pytest
from pathlib import Path

from http_origin import http_origin
from model_fetch import run_module
from stand_ins.hub_server import HubProcess, hub_repository
from stand_ins.s3_origin import REGION, S3Origin
from stand_ins.tiny_model import write_tiny_model
from test_vllm_model_fetch_serving import facts, fit
from ansible_collections.arm_inference.vllm.plugins.modules import vllm_model_fetch


COMMIT = "c" * 40
MOVED = "e" * 40
HOSTILE = "d" * 40
BNB_CONFIG = Path(__file__).resolve().parents[2] / "samples" / "models" / "llama-3.1-8b-instruct-bnb-8bit" / "config.json"
TOKEN = "hf_reach_token_never_shown"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    hub_repository(root, "org/tiny", {"main": COMMIT, "moved": MOVED}, seed=5)
    # The published config.json of a bitsandbytes checkpoint, which vLLM's CPU backend serves nowhere.
    hub_repository(root, "org/bnb", {"main": COMMIT}, seed=8)
    (root / "org" / "bnb" / COMMIT / "config.json").write_bytes(BNB_CONFIG.read_bytes())
    hub_repository(root, "org/gated", {"main": COMMIT}, seed=6, token=TOKEN)
    # config.json of this gated repository is redirected to another host, as the hub sends LFS files to its CDN.
    hub_repository(root, "org/cdn", {"main": COMMIT}, seed=9, token=TOKEN, answers={COMMIT: {"redirect": ["config.json"]}})
    # A hostile hub: `evil` answers a path for a commit, `unchecked` lists config.json without any checksum.
    hub_repository(root, "org/bad", {"main": HOSTILE, "evil": HOSTILE, "unchecked": HOSTILE}, seed=7,
                   answers={"evil": {"sha": "../../etc"}, HOSTILE: {"unchecked": ["config.json"]}})
    server = HubProcess(root).start()
    yield server
    server.stop()


@pytest.fixture(params=["without the hub client", "with the hub client"])
def client(request, monkeypatch):
    """A fresh host has no tools venv: the hub client is not importable by the Python the preflight runs."""
    if request.param == "without the hub client":
        monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    return request.param


def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def reach(capsys, store, **args):
    return run_module(capsys, action="reach", store=str(store), name="tiny", min_free_disk_gib=0, **args)


def test_a_hub_model_not_placed_must_answer_and_fit(capsys, tmp_path, hub, client):
    answer = reach(capsys, tmp_path / "store", source="hf://org/tiny", revision="main", endpoint=hub.endpoint,
                   fit=fit(facts("graviton4-c8g-16xlarge")))
    assert answer.get("failed") is not True, answer
    assert answer["needed"] is True and answer["revision"] == COMMIT
    assert answer["reached"] == ("hub API" if client == "without the hub client" else "source")
    assert answer["weight_bytes"] > 0 and answer["fit"][0]["checked"], answer
    assert answer["changed"] is False
    assert not os.path.exists(tmp_path / "store"), "reach wrote to the store"


def test_a_placed_revision_needs_no_network(capsys, tmp_path, hub):
    store = tmp_path / "store"
    placed = run_module(capsys, store=str(store), name="tiny", source="hf://org/tiny", revision=COMMIT,
                        endpoint=hub.endpoint, min_free_disk_gib=0)
    assert placed.get("failed") is not True, placed
    answer = reach(capsys, store, source="hf://org/tiny", revision=COMMIT, endpoint="http://127.0.0.1:%d" % closed_port())
    assert answer.get("failed") is not True, answer
    assert (answer["needed"], answer["reached"], answer["revision"]) == (False, "placed", COMMIT)


def test_an_unreachable_hub_is_refused_naming_the_model(capsys, tmp_path, client):
    endpoint = "http://127.0.0.1:%d" % closed_port()
    answer = reach(capsys, tmp_path / "store", source="hf://org/tiny", revision=COMMIT, endpoint=endpoint)
    assert answer.get("failed") is True, answer
    assert answer["msg"].startswith("vllm_model_models (tiny).endpoint: the hub at %s cannot be reached" % endpoint)
    assert "\n" not in answer["msg"]
    assert not os.path.exists(tmp_path / "store")


@pytest.mark.parametrize("source, revision, token, expected", [
    ("hf://org/tiny", "v9", None, "vllm_model_models (tiny).revision: org/tiny has no revision v9"),
    ("hf://org/none", "main", None, "vllm_model_models (tiny).source: no repository org/none on "),
    ("hf://org/gated", "main", None, "vllm_model_models (tiny).token: org/gated is gated and no token is set"),
    ("hf://org/gated", "main", "hf_wrong", "vllm_model_models (tiny).token: org/gated is gated and the token was "
                                           "refused"),
])
def test_the_hubs_refusals_name_what_to_fix(capsys, tmp_path, hub, client, source, revision, token, expected):
    args = {"token": token} if token else {}
    answer = reach(capsys, tmp_path / "store", source=source, revision=revision, endpoint=hub.endpoint, **args)
    assert answer.get("failed") is True, answer
    assert answer["msg"].startswith(expected), answer["msg"]
    assert TOKEN not in json.dumps(answer) and "hf_wrong" not in answer["msg"]


def test_a_gated_model_with_its_token_is_reached(capsys, tmp_path, hub, client):
    answer = reach(capsys, tmp_path / "store", source="hf://org/gated", revision="main", endpoint=hub.endpoint,
                   token=TOKEN)
    assert answer.get("failed") is not True, answer
    assert answer["revision"] == COMMIT


def test_the_token_goes_to_the_hub_and_never_along_a_redirect(capsys, tmp_path, hub, client):
    """The fit check reads config.json before any weight; the hub redirects it to another host (a CDN): the token
    was the hub's (the repository is gated), the CDN never sees it."""
    answer = reach(capsys, tmp_path / "store", source="hf://org/cdn", revision="main", endpoint=hub.endpoint,
                   token=TOKEN, fit=fit(facts("graviton4-c8g-16xlarge")))
    assert answer.get("failed") is not True, answer
    assert answer["revision"] == COMMIT and answer["fit"][0]["checked"], answer
    asked = [(path, header) for path, header in hub.cdn_requests() if path.endswith("/org/cdn/%s/config.json" % COMMIT)]
    assert asked and all(header == "" for dummy, header in asked), asked
    assert TOKEN not in json.dumps(answer)


@pytest.mark.parametrize("revision, expected", [
    ("evil", "vllm_model_models (tiny).endpoint: the hub at %s answered for evil"),
    ("unchecked", "vllm_model_models (tiny).endpoint: the hub at %s lists config.json of org/bad at %s without a "
                  "checksum" % ("%s", HOSTILE)),
])
def test_a_hostile_hub_is_refused_as_placing_refuses_it(capsys, tmp_path, hub, client, revision, expected):
    answer = reach(capsys, tmp_path / "store", source="hf://org/bad", revision=revision, endpoint=hub.endpoint)
    assert answer.get("failed") is True, answer
    assert answer["msg"].startswith(expected % hub.endpoint), answer["msg"]
    assert not os.path.exists(tmp_path / "store")


def test_a_model_too_large_for_the_host_or_its_disk_is_refused(capsys, tmp_path, hub, client):
    host = facts("graviton4-c8g-16xlarge")
    for node in host["numa_nodes"]:  # 1 GiB a node: no room for the KV cache floor beside the headroom
        node["memory_mib"] = 1024
    memory = reach(capsys, tmp_path / "store", source="hf://org/tiny", revision="main", endpoint=hub.endpoint,
                   fit=fit(host))
    assert memory.get("failed") is True, memory
    assert memory["msg"].startswith("vllm_model_models (tiny): tiny at %s needs 2.0 GiB per rank" % COMMIT), memory["msg"]
    disk = run_module(capsys, action="reach", store=str(tmp_path / "store"), name="tiny", source="hf://org/tiny",
                      revision="main", endpoint=hub.endpoint, min_free_disk_gib=1 << 30)
    assert disk.get("failed") is True, disk
    assert disk["msg"].startswith("vllm_model_store: not enough free disk for tiny at %s" % COMMIT), disk["msg"]
    assert not os.path.exists(tmp_path / "store")


def test_an_http_file_list_is_asked_as_placing_asks(capsys, tmp_path):
    write_tiny_model(str(tmp_path / "web" / "tiny"), seed=8)
    names = sorted(os.listdir(tmp_path / "web" / "tiny"))
    pins = dict((name, hashlib.sha256((tmp_path / "web" / "tiny" / name).read_bytes()).hexdigest()) for name in names)
    with http_origin(tmp_path / "web") as server:
        answer = reach(capsys, tmp_path / "store", source=server.url + "/tiny/", sha256=pins)
        assert answer.get("failed") is not True, answer
        assert answer["reached"] == "source" and answer["needed"] is True
        assert not [request for request in server.requests if request[1].endswith(".safetensors")
                    and request[0] == "GET"], server.requests
        missing = reach(capsys, tmp_path / "store", source=server.url + "/gone/", sha256=pins)
    assert missing.get("failed") is True
    assert missing["msg"].startswith("vllm_model_models (tiny).source: %s/gone/" % server.url), missing["msg"]
    closed = reach(capsys, tmp_path / "store", source="http://127.0.0.1:%d/tiny/" % closed_port(), sha256=pins)
    assert closed.get("failed") is True and "cannot be fetched" in closed["msg"], closed
    assert not os.path.exists(tmp_path / "store")


def test_an_s3_source_without_boto3_must_reach_its_endpoint(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)
    args = {"source": "s3://models/tiny", "sha256": {"model.safetensors": "0" * 64}, "region": "eu-west-1"}
    with http_origin(tmp_path) as server:  # any answer of the bucket's server (here a 404) is an answer
        answer = reach(capsys, tmp_path / "store", endpoint_url=server.url, **args)
    assert answer.get("failed") is not True, answer
    assert answer["reached"] == "endpoint"
    assert ("HEAD", "/models") in server.requests
    endpoint = "http://127.0.0.1:%d" % closed_port()
    refused = reach(capsys, tmp_path / "store", endpoint_url=endpoint, **args)
    assert refused.get("failed") is True, refused
    assert refused["msg"].startswith("vllm_model_models (tiny).endpoint_url: %s cannot be reached" % endpoint), \
        refused["msg"]


def test_a_host_directory_must_be_there(capsys, tmp_path):
    pins = {"sha256": {"model.safetensors": "0" * 64}}
    refused = reach(capsys, tmp_path / "store", source="file://%s/nowhere" % tmp_path, **pins)
    assert refused.get("failed") is True
    assert refused["msg"].startswith("vllm_model_models (tiny).source: %s/nowhere is not a directory on this host"
                                     % tmp_path), refused["msg"]
    (tmp_path / "here").mkdir()
    assert reach(capsys, tmp_path / "store", source="file://%s/here" % tmp_path, **pins)["reached"] == "directory"


@pytest.mark.parametrize("without_client", [True, False])
def test_a_branch_is_asked_where_it_leads_now_even_where_the_host_holds_a_commit_of_it(capsys, tmp_path, hub,
                                                                                       monkeypatch, without_client):
    store = tmp_path / "store"
    placed = run_module(capsys, store=str(store), name="tiny", source="hf://org/tiny", revision="main",
                        endpoint=hub.endpoint, min_free_disk_gib=0)
    assert placed.get("failed") is not True and placed["revision"] == COMMIT, placed
    if without_client:
        monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    refs = hub.root / "org" / "tiny" / "refs.json"
    try:
        refs.write_text(json.dumps({"main": MOVED}))  # main moved since: the run will move the host to it
        moved = reach(capsys, store, source="hf://org/tiny", revision="main", endpoint=hub.endpoint)
    finally:
        refs.write_text(json.dumps({"main": COMMIT}))
    assert moved.get("failed") is not True, moved
    assert (moved["needed"], moved["revision"]) == (True, MOVED), moved
    held = reach(capsys, store, source="hf://org/tiny", revision="main", endpoint=hub.endpoint)
    assert (held["needed"], held["reached"], held["revision"]) == (False, "placed", COMMIT), held
    # No answer at all: the run keeps the commit the host holds (unless the controller resolves main), so it passes.
    silent = reach(capsys, store, source="hf://org/tiny", revision="main", endpoint="http://127.0.0.1:%d" % closed_port())
    assert silent.get("failed") is not True, silent
    assert (silent["needed"], silent["reached"]) == (False, "placed (the source did not answer)"), silent


@pytest.fixture(scope="module")
def fleet_mirror():
    """moto's S3 server (tests/stand_ins/s3_origin.py) with the fleet's mirror bucket, empty."""
    server = S3Origin().start()
    server.client().create_bucket(Bucket="fleet-cache", CreateBucketConfiguration={"LocationConstraint": REGION})
    yield server
    server.stop()


def mirrored(endpoint):
    return {"mirror": "s3://fleet-cache/models", "region": REGION, "endpoint_url": endpoint,
            "access_key_id": "AKIAREACHREACHREACH0", "secret_access_key": "reach-secret"}


def test_a_mirrored_model_passes_when_its_origin_does_not_answer_this_host_but_not_when_it_refuses(capsys, tmp_path,
                                                                                                   hub, client,
                                                                                                   fleet_mirror):
    mirror = mirrored(fleet_mirror.endpoint)
    silent = reach(capsys, tmp_path / "store", source="hf://org/tiny", revision=COMMIT,
                   endpoint="http://127.0.0.1:%d" % closed_port(), **mirror)
    assert silent.get("failed") is not True, silent
    assert (silent["needed"], silent["reached"]) == (True, "mirror (the origin did not answer)"), silent
    refused = reach(capsys, tmp_path / "store", source="hf://org/tiny", revision="v9", endpoint=hub.endpoint, **mirror)
    assert refused.get("failed") is True and refused["msg"].startswith("vllm_model_models (tiny).revision: "), refused
    answered = reach(capsys, tmp_path / "store", source="hf://org/tiny", revision=COMMIT, endpoint=hub.endpoint,
                     **mirror)
    assert answered.get("failed") is not True, answered
    assert (answered["needed"], answered["mirror"]) == (True, "refs read"), answered


@pytest.mark.parametrize("origin_answers", [True, False])
def test_a_mirror_this_host_cannot_reach_is_refused_before_any_host_changes(capsys, tmp_path, hub, origin_answers):
    """Every host reads the mirror (one seeds it): one that cannot reach it would fail at placing, after the rest of
    the run changed it."""
    endpoint = "http://127.0.0.1:%d" % closed_port()
    refused = reach(capsys, tmp_path / "store", source="hf://org/tiny", revision=COMMIT,
                    endpoint=hub.endpoint if origin_answers else "http://127.0.0.1:%d" % closed_port(),
                    **mirrored(endpoint))
    assert refused.get("failed") is True, refused
    assert refused["msg"].startswith("vllm_model_models (tiny).endpoint_url: %s cannot be reached for "
                                     "s3://fleet-cache/models/tiny/refs.json" % endpoint), refused["msg"]
    assert not os.path.exists(tmp_path / "store")


def test_a_mirror_whose_bucket_does_not_exist_or_whose_refs_are_hostile_is_refused(capsys, tmp_path, hub, fleet_mirror):
    args = dict(mirrored(fleet_mirror.endpoint), source="hf://org/tiny", revision=COMMIT, endpoint=hub.endpoint)
    elsewhere = dict(args)
    elsewhere["mirror"] = "s3://no-bucket/m"
    missing = reach(capsys, tmp_path / "store", **elsewhere)
    assert missing.get("failed") is True, missing
    assert missing["msg"].startswith("vllm_model_models (tiny).mirror: the bucket of s3://no-bucket/m/tiny/refs.json "
                                     "does not exist"), missing["msg"]
    fleet_mirror.client().put_object(Bucket="fleet-cache", Key="models/tiny/refs.json",
                                     Body=json.dumps({COMMIT: "../../etc"}).encode())
    try:
        hostile = reach(capsys, tmp_path / "store", **args)
    finally:
        fleet_mirror.client().delete_object(Bucket="fleet-cache", Key="models/tiny/refs.json")
    assert hostile.get("failed") is True, hostile
    assert hostile["msg"].startswith("vllm_model_models (tiny).mirror: s3://fleet-cache/models/tiny/refs.json "
                                     "entry "), hostile["msg"]


def test_a_mirror_without_boto3_must_reach_its_endpoint(capsys, tmp_path, hub, monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)
    args = {"source": "hf://org/tiny", "revision": COMMIT, "endpoint": hub.endpoint}
    with http_origin(tmp_path) as server:  # any answer of the bucket's server (here a 404) is an answer
        answer = reach(capsys, tmp_path / "store", **dict(mirrored(server.url), **args))
    assert answer.get("failed") is not True, answer
    assert answer["mirror"] == "endpoint" and ("HEAD", "/fleet-cache") in server.requests
    endpoint = "http://127.0.0.1:%d" % closed_port()
    refused = reach(capsys, tmp_path / "store", **dict(mirrored(endpoint), **args))
    assert refused.get("failed") is True, refused
    assert refused["msg"].startswith("vllm_model_models (tiny).endpoint_url: %s cannot be reached for "
                                     "s3://fleet-cache/models" % endpoint), refused["msg"]


def test_a_fresh_host_runs_vllm_serves_rules_on_the_hubs_config_before_any_weight(capsys, tmp_path, hub, client):
    answer = reach(capsys, tmp_path / "store", source="hf://org/bnb", revision=COMMIT, endpoint=hub.endpoint,
                   fit=fit(facts("graviton4-c8g-16xlarge")))
    assert answer.get("failed") is True, answer
    assert "bitsandbytes checkpoints are not served by vLLM's CPU backend on Arm" in answer["msg"], answer["msg"]
    assert "\n" not in answer["msg"]
    assert not [path for method, path in hub.requests() if path.startswith("/org/bnb/") and method == "GET"
                and path.endswith(".safetensors")]


def test_a_hub_listing_with_a_size_that_is_not_a_byte_count_is_refused():
    model = {"name": "tiny", "location": "org/tiny", "include": [], "exclude": []}
    for size in ("12", -1, True, 1.5):
        siblings = {"config.json": {"size": size, "blob_id": "a" * 40, "lfs": False, "lfs_sha256": None,
                                    "lfs_size": None}}
        pattern = r"lists config.json of org/tiny at .* with size .*, not a byte count"
        with pytest.raises(vllm_model_fetch.ModelStoreError, match=pattern):
            vllm_model_fetch._hub_expected(model, "http://hub", COMMIT, siblings)
