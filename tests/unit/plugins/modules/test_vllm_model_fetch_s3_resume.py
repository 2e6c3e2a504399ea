"""An S3 file interrupted part-way is gone on from: the real boto3 against moto's S3 server
(tests/stand_ins/s3_origin.py) behind a proxy (tests/stand_ins/s3_proxy.py) that breaks the connection in the middle
of chosen ranged GETs, or answers a range wrongly. The weights are fetched in three parts (PART_BYTES lowered so the
2 MiB shard makes three); the next run asks S3 only for the parts that did not arrive, and the file is verified whole.
A part answered with another length or place is refused (staging goes), a record of the parts that does not parse
counts as nothing done, and an object changed since (another ETag) starts again. From an s3:// source and from a
fleet mirror. On the old code (boto3's download_file: one GET of a small file, its temp file deleted on failure)
nothing was interrupted part-way and nothing was gone on from."""

from __future__ import annotations

import hashlib
import os

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_s3
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store
from model_fetch import run_module
from stand_ins.s3_origin import REGION, S3Origin
from stand_ins.s3_proxy import S3Proxy
from stand_ins.tiny_model import write_tiny_model

SHARD = "model.safetensors"
KEYS = {"access_key_id": "AKIASETUPSETUPSETUP0", "secret_access_key": "setup-only"}


@pytest.fixture(scope="module")
def origin():
    server = S3Origin().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def proxy(origin):
    with S3Proxy(origin.endpoint) as running:
        yield running


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def parts_of(size, monkeypatch):
    """Three parts for the shard: PART_BYTES lowered (and no pause before a part is asked for again); returns their
    Range headers."""
    part = size // 3 + 1
    monkeypatch.setattr(vllm_model_s3, "PART_BYTES", part)
    monkeypatch.setattr(vllm_model_s3, "PART_RETRY_SECONDS", 0)
    return ["bytes=%d-%d" % (first, min(size, first + part) - 1) for first in range(0, size, part)]


def staging(store):
    [entry] = [name for name in os.listdir(store / "tiny") if name.startswith(".staging-")]
    return store / "tiny" / entry


def upload(origin, tmp_path, bucket, prefix, seed):
    root = write_tiny_model(str(tmp_path / ("model-%d" % seed)), seed=seed, hidden=256, vocab=1024)  # a 2 MiB shard
    origin.put_model(bucket, prefix, root)
    return root, dict((name, digest(os.path.join(root, name))) for name in os.listdir(root))


def place(capsys, proxy, store, sums, bucket="models"):
    return run_module(capsys, store=str(store), name="tiny", source="s3://%s/org/tiny" % bucket, sha256=sums,
                      region=REGION, endpoint_url=proxy.url, min_free_disk_gib=0, **KEYS)


def interrupted(capsys, proxy, store, sums, parts, path, run=None):
    """The first run: the connection breaks in the middle of the second and third part; part one stays."""
    for asked in parts[1:]:
        proxy.faults[(path, asked)] = "cut"
    first = (run or place)(capsys, proxy, store, sums)
    proxy.faults.clear()
    assert first.get("failed") is True, first
    assert "stay in %s" % staging(store) in first["msg"], first["msg"]
    return first


def test_an_s3_file_interrupted_part_way_goes_on_from_its_parts(capsys, tmp_path, origin, proxy, monkeypatch):
    root, sums = upload(origin, tmp_path, "models", "org/tiny", seed=91)
    size = os.path.getsize(os.path.join(root, SHARD))
    parts, path, store = parts_of(size, monkeypatch), "/models/org/tiny/" + SHARD, tmp_path / "store"
    interrupted(capsys, proxy, store, sums, parts, path)
    left = staging(store)
    assert os.path.getsize(left / SHARD) == size  # created at its full size, holes where parts are missing
    assert os.listdir(left / vllm_model_store.PARTS_DIR)  # the record of the part that arrived
    before = len(proxy.gets)
    second = place(capsys, proxy, store, sums)
    assert second.get("failed") is not True, second
    again = [rng for got, rng in proxy.gets[before:] if got == path]
    assert parts[0] not in again, again  # what arrived is not asked for again
    # config.json (one part) arrived whole in the first run: not fetched again (only read, with the reader's range).
    whole = "bytes=0-%d" % (os.path.getsize(os.path.join(root, "config.json")) - 1)
    assert whole not in [rng for got, rng in proxy.gets[before:] if got == "/models/org/tiny/config.json"]
    assert sorted(rng for rng in again if rng in parts) == sorted(parts[1:]), again
    # Placed and verified whole; the resume counted the part on disk, and nothing of the record was placed.
    assert second["resumed_bytes"] >= size // 3, second
    placed = store / "tiny" / "current"
    assert digest(placed / SHARD) == sums[SHARD]
    assert sorted(os.listdir(placed)) == sorted(sums)
    assert not [name for name in os.listdir(store / "tiny") if name.startswith(".staging-")]


def test_a_part_whose_connection_drops_once_is_asked_for_again_in_the_same_run(
        capsys, tmp_path, origin, proxy, monkeypatch):
    """The connection drops once in the middle of parts two and three: the run asks for each again and places the
    model; each part counts once against the size S3 announced. On the old code the run failed, leaving staging."""
    root, sums = upload(origin, tmp_path, "models", "org/tiny", seed=96)
    size = os.path.getsize(os.path.join(root, SHARD))
    parts, path, store = parts_of(size, monkeypatch), "/models/org/tiny/" + SHARD, tmp_path / "store"
    for asked in parts[1:]:
        proxy.faults[(path, asked)] = "cut-once"
    written = []  # each part, once written, is on its way to disk (writeback started) before the file's fsync
    monkeypatch.setattr(vllm_model_store, "start_writeback", lambda descriptor, first, length: written.append(
        (os.path.basename(os.readlink("/proc/self/fd/%d" % descriptor)), first, length)))
    placed = place(capsys, proxy, store, sums)
    assert placed.get("failed") is not True, placed
    assert sorted((first, first + length - 1) for name, first, length in written if name == SHARD) == sorted(
        tuple(int(number) for number in part[len("bytes="):].split("-")) for part in parts), written
    asked = proxy.ranges(path)
    assert [asked.count(part) for part in parts] == [1, 2, 2], asked
    assert digest(store / "tiny" / "current" / SHARD) == sums[SHARD]
    assert not [name for name in os.listdir(store / "tiny") if name.startswith(".staging-")]


def test_a_part_that_keeps_breaking_is_asked_for_three_times_then_kept_for_the_next_run(
        capsys, tmp_path, origin, proxy, monkeypatch):
    root, sums = upload(origin, tmp_path, "models", "org/tiny", seed=97)
    parts = parts_of(os.path.getsize(os.path.join(root, SHARD)), monkeypatch)
    path, store = "/models/org/tiny/" + SHARD, tmp_path / "store"
    interrupted(capsys, proxy, store, sums, parts, path)
    assert proxy.ranges(path).count(parts[1]) == vllm_model_s3.PART_ATTEMPTS == 3


@pytest.mark.parametrize("fault", ["short", "elsewhere"])
def test_a_part_of_another_length_or_place_is_refused(capsys, tmp_path, origin, proxy, monkeypatch, fault):
    root, sums = upload(origin, tmp_path, "models", "org/tiny", seed=92)
    parts, path = parts_of(os.path.getsize(os.path.join(root, SHARD)), monkeypatch), "/models/org/tiny/" + SHARD
    proxy.faults[(path, parts[1])] = fault
    store = tmp_path / "store"
    refused = place(capsys, proxy, store, sums)
    assert refused.get("failed") is True, refused
    assert refused["msg"].startswith("tiny: vllm_model_models (tiny).source: s3://models/org/tiny/%s answered the range "
                                     "%s with " % (SHARD, parts[1])), refused["msg"]
    assert "nothing of it was written" in refused["msg"] and "stay in" not in refused["msg"], refused["msg"]
    assert not [name for name in os.listdir(store / "tiny") if name.startswith(".staging-")]


def test_a_record_that_does_not_parse_counts_as_nothing_done(capsys, tmp_path, origin, proxy, monkeypatch):
    root, sums = upload(origin, tmp_path, "models", "org/tiny", seed=93)
    parts = parts_of(os.path.getsize(os.path.join(root, SHARD)), monkeypatch)
    path, store = "/models/org/tiny/" + SHARD, tmp_path / "store"
    interrupted(capsys, proxy, store, sums, parts, path)
    record = vllm_model_store.parts_record(str(staging(store)), SHARD)
    with open(record, "rb") as handle:
        text = handle.read()
    with open(record, "wb") as handle:  # the header broken, the parts that never arrived claimed
        handle.write(b"[" + text[1:] + b"1\n2\n")
    before = len(proxy.gets)
    second = place(capsys, proxy, store, sums)
    assert second.get("failed") is not True, second
    assert set(parts) <= set(rng for got, rng in proxy.gets[before:] if got == path)
    assert digest(store / "tiny" / "current" / SHARD) == sums[SHARD]


def test_an_object_changed_since_starts_again(capsys, tmp_path, origin, proxy, monkeypatch):
    root, sums = upload(origin, tmp_path, "models", "org/tiny", seed=94)
    size = os.path.getsize(os.path.join(root, SHARD))
    parts, path, store = parts_of(size, monkeypatch), "/models/org/tiny/" + SHARD, tmp_path / "store"
    interrupted(capsys, proxy, store, sums, parts, path)
    # The same size, other bytes in the first part (the one that arrived): another ETag.
    data = bytearray(open(os.path.join(root, SHARD), "rb").read())
    data[size // 3 - 64:size // 3 - 32] = os.urandom(32)
    origin.client().put_object(Bucket="models", Key="org/tiny/" + SHARD, Body=bytes(data))
    changed = dict(sums, **{SHARD: hashlib.sha256(data).hexdigest()})
    before = len(proxy.gets)
    second = place(capsys, proxy, store, changed)
    assert second.get("failed") is not True, second
    assert set(parts) <= set(rng for got, rng in proxy.gets[before:] if got == path)
    assert digest(store / "tiny" / "current" / SHARD) == changed[SHARD]


def test_a_file_from_the_mirror_interrupted_part_way_goes_on_from_its_parts(capsys, tmp_path, origin, proxy,
                                                                            monkeypatch):
    model = write_tiny_model(str(tmp_path / "model"), seed=95, hidden=256, vocab=1024)
    manifest = run_module(capsys, action="manifest", name="tiny", source="controller://" + model)
    revision = manifest["revision"]
    origin.put_model("fleet", "models/tiny/" + revision, model)
    size = os.path.getsize(os.path.join(model, SHARD))
    parts, path, store = parts_of(size, monkeypatch), "/fleet/models/tiny/%s/%s" % (revision, SHARD), \
        tmp_path / "store"
    sums = dict((name, entry["sha256"]) for name, entry in manifest["manifest"].items())

    def from_mirror(capsys, proxy, store, sums):
        return run_module(capsys, store=str(store), name="tiny", source="controller://" + model,
                          mirror="s3://fleet/models", region=REGION, endpoint_url=proxy.url, min_free_disk_gib=0,
                          revision=revision, manifest=manifest["manifest"], mirror_revision=revision,
                          mirror_manifest=sums, **KEYS)

    first = interrupted(capsys, proxy, store, sums, parts, path, run=from_mirror)
    assert first["msg"].startswith("vllm_model_models (tiny).mirror: "), first["msg"]
    before = len(proxy.gets)
    second = from_mirror(capsys, proxy, store, sums)
    assert second.get("failed") is not True, second
    again = [rng for got, rng in proxy.gets[before:] if got == path]
    assert parts[0] not in again and sorted(rng for rng in again if rng in parts) == sorted(parts[1:]), again
    assert digest(store / "tiny" / "current" / SHARD) == sums[SHARD]
