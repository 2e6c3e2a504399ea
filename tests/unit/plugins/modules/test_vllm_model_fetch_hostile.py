"""vllm_model_fetch against hostile origins: a mirror whose refs.json maps a ref to '../../escape', a seeder's result
naming that revision or a file outside the model directory, a hub (the stand-in, tests/stand_ins/hub_server.py, with
its hostile answer.json) answering a sha of '../../escape'. Each is refused with one line naming where it came from,
and nothing is written outside the store. The real boto3 against moto's S3 server (tests/stand_ins/s3_origin.py), the
real huggingface_hub client against the hub stand-in, both on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as rules

from stand_ins.hub_server import HubProcess
from stand_ins.s3_origin import REGION, S3Origin
from stand_ins.tiny_model import write_tiny_model
from model_fetch import run_module  # noqa: E402

BUCKET = "fleet-cache"
ESCAPE = "../../escape"
COMMIT = "5" * 40
KEYS = {"access_key_id": "AKIASETUPSETUPSETUP0", "secret_access_key": "setup-only"}


@pytest.fixture(scope="module")
def mirror():
    server = S3Origin().start()
    server.client().create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    yield server
    server.stop()


def sums_of(directory):
    return dict((name, hashlib.sha256(open(os.path.join(directory, name), "rb").read()).hexdigest())
                for name in sorted(os.listdir(directory)))


def publish(server, revision, directory, model="tiny", names=None):
    """What a hostile writer of the mirror puts there: files and a SHA256SUMS under models/<model>/<revision>/."""
    client, sums = server.client(), sums_of(directory)
    for name in sums:
        client.put_object(Bucket=BUCKET, Key="models/%s/%s/%s" % (model, revision, (names or {}).get(name, name)),
                          Body=open(os.path.join(directory, name), "rb").read())
    lines = "".join("%s  %s\n" % (digest, name) for name, digest in sums.items())
    client.put_object(Bucket=BUCKET, Key="models/%s/%s/SHA256SUMS" % (model, revision), Body=lines.encode())
    return sums


def http_model(server, tmp_path, pins, **extra):
    return dict({"name": "tiny", "source": "http://127.0.0.1:9/tiny/", "sha256": pins,
                 "mirror": "s3://%s/models" % BUCKET, "region": REGION, "endpoint_url": server.endpoint,
                 "store": str(tmp_path / "store"), "min_free_disk_gib": 0}, **dict(KEYS, **extra))


def nothing_escaped(tmp_path):
    assert not (tmp_path / "escape").exists()
    assert not [entry for entry in os.listdir(tmp_path) if entry not in ("store", "good", "evil", "hub")]


def test_a_mirror_refs_json_naming_a_path_is_refused_by_the_seeder(capsys, tmp_path, mirror):
    good = write_tiny_model(str(tmp_path / "good"), seed=61)
    evil = write_tiny_model(str(tmp_path / "evil"), seed=62)
    args = http_model(mirror, tmp_path, sums_of(good))
    # The ref a source with the operator's sha256 is recorded under: its checksums' revision.
    ref = rules.manifest_revision(dict((name, {"sha256": digest}) for name, digest in args["sha256"].items()))
    publish(mirror, ESCAPE, evil)
    mirror.client().put_object(Bucket=BUCKET, Key="models/tiny/refs.json", Body=json.dumps({ref: ESCAPE}).encode())
    seeded = run_module(capsys, **dict(args, action="seed"))
    assert seeded.get("failed"), seeded
    assert seeded["msg"].startswith("vllm_model_models (tiny).mirror: s3://%s/models/tiny/refs.json entry %s: not a "
                                    "revision label" % (BUCKET, ref)), seeded["msg"]
    assert "\n" not in seeded["msg"] and KEYS["secret_access_key"] not in json.dumps(seeded)
    nothing_escaped(tmp_path)


@pytest.mark.parametrize("revision, rename", [
    (ESCAPE, {}),  # a revision that is a path
    ("v1", {"config.json": "../../../escape/config.json"}),  # a file name that leaves the model directory
])
def test_a_seeders_result_naming_a_path_is_refused_by_the_hosts(capsys, tmp_path, mirror, revision, rename):
    evil = write_tiny_model(str(tmp_path / "evil"), seed=63)
    sums = publish(mirror, revision, evil, names=rename)
    manifest = dict((rename.get(name, name), digest) for name, digest in sums.items())
    placed = run_module(capsys, **http_model(mirror, tmp_path, sums, revision="v1", mirror_revision=revision,
                                             mirror_manifest=manifest))
    assert placed.get("failed"), placed
    assert placed["msg"].startswith("vllm_model_models (tiny).mirror: the seeder's result: "), placed["msg"]
    nothing_escaped(tmp_path)
    assert not os.path.exists(tmp_path / "store" / "tiny" / "current")


@pytest.fixture()
def hostile_hub(tmp_path):
    root = tmp_path / "hub"
    write_tiny_model(str(root / "org" / "tiny" / COMMIT), seed=64)
    # The hostile sha also names the commit's files, so a client that believed it would download and place them.
    (root / "org" / "tiny" / "refs.json").write_text(json.dumps({"main": COMMIT, ESCAPE: COMMIT}))
    (root / "org" / "tiny" / "answer.json").write_text(json.dumps({"main": {"sha": ESCAPE}}))
    server = HubProcess(root).start()
    yield server
    server.stop()


def test_a_hub_answering_a_sha_that_is_a_path_is_refused(capsys, tmp_path, hostile_hub):
    pytest.importorskip("huggingface_hub")
    placed = run_module(capsys, name="tiny", source="hf://org/tiny", revision="main", endpoint=hostile_hub.endpoint,
                        store=str(tmp_path / "store"), min_free_disk_gib=0)
    assert placed.get("failed"), placed
    assert placed["msg"].startswith("vllm_model_models (tiny).endpoint: the hub at %s answered for main: not a hub "
                                    "commit (40 lower-case hex digits) (got %s); " % (hostile_hub.endpoint, ESCAPE))
    assert hostile_hub.bytes_served() == 0
    nothing_escaped(tmp_path)
