"""vllm_model_fetch against hostile origins: a mirror whose refs.json maps a ref to '../../escape', a seeder's result
naming that revision or a file outside the model directory, a hub (the stand-in, tests/stand_ins/hub_server.py, with
its hostile answer.json) answering a sha of '../../escape'; a mirror holding other bytes than the source pins (the
operator's sha256, the hub's per-file checksums). Each is refused with one line naming where it came from, and
nothing is written outside the store; a mirror that agrees with the hub stays a cache (the hub sends no file).
The real boto3 against moto's S3 server (tests/stand_ins/s3_origin.py), the real huggingface_hub client against the
hub stand-in, both on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as rules

from stand_ins.hub_server import HubProcess, hub_repository
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
    assert not [entry for entry in os.listdir(tmp_path) if entry not in ("store", "good", "evil")]


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


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    hub_repository(root, "org/tiny", {"main": COMMIT}, seed=64)
    # A hostile hub: its sha for main is a path, and that path also names the commit's files, so a client that
    # believed it would download and place them.
    hub_repository(root, "org/hostile", {"main": COMMIT, ESCAPE: COMMIT}, seed=64, answers={"main": {"sha": ESCAPE}})
    # A hub that lists a file without any checksum (no LFS sha256, no blob id).
    hub_repository(root, "org/unchecked", {"main": COMMIT}, seed=64,
                   answers={"main": {"unchecked": ["tokenizer_config.json"]}})
    server = HubProcess(root).start()
    yield server
    server.stop()


def hub_model(hub, tmp_path, **extra):
    return dict({"name": "tiny", "source": "hf://org/tiny", "revision": COMMIT, "endpoint": hub.endpoint,
                 "store": str(tmp_path / "store"), "min_free_disk_gib": 0}, **extra)


def test_a_hub_answering_a_sha_that_is_a_path_is_refused(capsys, tmp_path, hub):
    served = hub.bytes_served()
    placed = run_module(capsys, **hub_model(hub, tmp_path, source="hf://org/hostile", revision="main"))
    assert placed.get("failed"), placed
    assert placed["msg"].startswith("vllm_model_models (tiny).endpoint: the hub at %s answered for main: not a hub "
                                    "commit (40 lower-case hex digits) (got %s); " % (hub.endpoint, ESCAPE))
    assert hub.bytes_served() == served
    nothing_escaped(tmp_path)


def test_the_mirror_is_checked_against_the_operators_sha256(capsys, tmp_path, mirror):
    """The mirror holds other bytes under the revision the operator pinned: the seeder and every host refuse them."""
    good = write_tiny_model(str(tmp_path / "good"), seed=65)
    evil = write_tiny_model(str(tmp_path / "evil"), seed=66)
    args = http_model(mirror, tmp_path, sums_of(good), revision="pinned", name="pinned")
    evil_sums = publish(mirror, "pinned", evil, model="pinned")
    expected = ("vllm_model_models (pinned).mirror: s3://%s/models/pinned/pinned/ disagrees with the checksums the "
                "source pins (got differences in config.json, model.safetensors); " % BUCKET)
    seeded = run_module(capsys, **dict(args, action="seed"))
    assert seeded.get("failed") and seeded["msg"].startswith(expected), seeded
    placed = run_module(capsys, **dict(args, mirror_revision="pinned", mirror_manifest=evil_sums))
    assert placed.get("failed") and placed["msg"].startswith(expected), placed
    assert not os.path.lexists(tmp_path / "store" / "pinned" / "current")


def hub_mirror(server, hub, tmp_path, **extra):
    return hub_model(hub, tmp_path, mirror="s3://%s/models" % BUCKET, region=REGION, endpoint_url=server.endpoint,
                     **dict(KEYS, **extra))


@pytest.mark.parametrize("name, tampered, words", [
    ("lfs", "model.safetensors", "disagrees with the checksums the source pins (got differences in model.safetensors)"),
    ("blob", "config.json", "does not verify: tiny-blob: config.json does not match the git object id"),
])
def test_the_mirror_of_a_hub_commit_is_checked_against_the_hubs_checksums(
        capsys, tmp_path, mirror, hub, name, tampered, words):
    """Other bytes in the mirror under the hub's commit, in an LFS file (the hub's sha256 differs) or a small file
    (its git object id differs): refused, naming the mirror, and nothing is current."""
    copy = tmp_path / "evil"
    write_tiny_model(str(copy), seed=64)
    data = (copy / tampered).read_bytes()
    (copy / tampered).write_bytes(data[:-1] + (b"x" if data[-1:] != b"x" else b"y"))  # same size, other bytes
    publish(mirror, COMMIT, str(copy), model="tiny-" + name)
    seeded = run_module(capsys, **hub_mirror(mirror, hub, tmp_path, name="tiny-" + name, action="seed"))
    assert seeded.get("failed"), seeded
    assert seeded["msg"].startswith("vllm_model_models (tiny-%s).mirror: " % name) and words in seeded["msg"], seeded
    assert not os.path.lexists(tmp_path / "store" / ("tiny-" + name) / "current")


def test_a_mirror_that_agrees_with_the_hub_is_a_cache(capsys, tmp_path, mirror, hub):
    """The seeder checks the mirror's copy against the hub's metadata and places it from the mirror: the hub sends
    no file byte; what it hands on is what it verified."""
    publish(mirror, COMMIT, str(hub.root / "org" / "tiny" / COMMIT), model="cached")
    served = hub.bytes_served()
    seeded = run_module(capsys, **hub_mirror(mirror, hub, tmp_path, name="cached", action="seed"))
    assert seeded.get("failed") is not True, seeded
    assert seeded["seeded_from"] == "mirror" and seeded["revision"] == COMMIT and seeded["changed"]
    assert seeded["manifest"] == sums_of(str(hub.root / "org" / "tiny" / COMMIT))
    assert hub.bytes_served() == served
    assert os.readlink(tmp_path / "store" / "cached" / "current") == COMMIT


def test_a_hub_file_without_a_checksum_is_refused(capsys, tmp_path, hub):
    served = hub.bytes_served()
    placed = run_module(capsys, **hub_model(hub, tmp_path, source="hf://org/unchecked", revision="main"))
    assert placed.get("failed"), placed
    assert placed["msg"].startswith("vllm_model_models (tiny).endpoint: the hub at %s lists tokenizer_config.json of "
                                    "org/unchecked at %s without a checksum (got LFS sha256 none, blob id none); "
                                    % (hub.endpoint, COMMIT)), placed["msg"]
    assert hub.bytes_served() == served and not os.path.exists(tmp_path / "store" / "tiny" / "current")
    # Left out with exclude, the rest is placed, every file verified.
    placed = run_module(capsys, **hub_model(hub, tmp_path, source="hf://org/unchecked", revision="main",
                                            exclude=["tokenizer_config.json"]))
    assert placed.get("failed") is not True, placed
    assert sorted(os.listdir(tmp_path / "store" / "tiny" / "current")) == ["config.json", "model.safetensors"]


def test_a_model_directory_that_is_a_link_out_of_the_store_is_refused_and_left_alone(capsys, tmp_path):
    """<store>/<name> a symlink to a directory elsewhere (a mistake, or a planted link): nothing is written, removed or
    linked there; the run is refused naming the link."""
    model = write_tiny_model(str(tmp_path / "model"), seed=61)
    sums = dict((name, hashlib.sha256(open(os.path.join(model, name), "rb").read()).hexdigest())
                for name in os.listdir(model))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("the operator's")
    store = tmp_path / "store"
    store.mkdir()
    os.symlink(str(outside), str(store / "tiny"))
    refused = run_module(capsys, store=str(store), name="tiny", source="file://" + model, sha256=sums,
                         min_free_disk_gib=0)
    assert refused.get("failed") is True, refused
    assert "%s resolves to %s, outside %s" % (store / "tiny", outside, store) in refused["msg"], refused["msg"]
    assert sorted(os.listdir(outside)) == ["keep.txt"] and (outside / "keep.txt").read_text() == "the operator's"


def test_every_host_checks_a_hub_commit_from_the_mirror_against_the_hub_itself(capsys, tmp_path, mirror, hub):
    """A seeder that wrote the mirror (the writer, taken over) hands on other bytes under the hub's commit with their
    genuine sha256: each host asks the hub for its own checksums (one metadata request, no file byte) and refuses
    them, naming the mirror; on the old code the host believed the seeder and placed them. The genuine copy is
    placed, and with the hub unreachable a host takes the seeder's checksums, with a warning (a host joining while the
    hub is down)."""
    copy = tmp_path / "evil"
    write_tiny_model(str(copy), seed=64)
    data = (copy / "model.safetensors").read_bytes()
    (copy / "model.safetensors").write_bytes(data[:-1] + (b"x" if data[-1:] != b"x" else b"y"))
    evil = publish(mirror, COMMIT, str(copy), model="handed")
    served = hub.bytes_served()
    args = hub_mirror(mirror, hub, tmp_path, name="handed", mirror_revision=COMMIT)
    refused = run_module(capsys, **dict(args, mirror_manifest=evil))
    assert refused.get("failed") and refused["msg"].startswith(
        "vllm_model_models (handed).mirror: s3://%s/models/handed/%s/ disagrees with the checksums the source pins (got "
        "differences in model.safetensors)" % (BUCKET, COMMIT)), refused
    assert not os.path.lexists(tmp_path / "store" / "handed" / "current") and hub.bytes_served() == served

    genuine = publish(mirror, COMMIT, str(hub.root / "org" / "tiny" / COMMIT), model="handed")
    placed = run_module(capsys, **dict(args, mirror_manifest=genuine))
    assert placed.get("failed") is not True and placed["changed"], placed
    assert hub.bytes_served() == served  # the files came from the mirror
    joined = run_module(capsys, **dict(args, mirror_manifest=genuine, endpoint="http://127.0.0.1:9",
                                       store=str(tmp_path / "joined")))
    assert joined.get("failed") is not True and joined["changed"], joined
