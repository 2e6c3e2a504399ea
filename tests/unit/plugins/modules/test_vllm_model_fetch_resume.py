"""A transfer that stops early is gone on from, not started again: what arrived stays in the revision's staging
directory, and the next run asks an HTTP(S) origin for the rest of the file (a Range request) and fetches no file that
is already complete; every byte is still verified against the pins, and what fails its checksum is removed, so the run
after that starts from zero. Against the hostile origin stand-in (tests/stand_ins/hostile_http.py), whose `cut` file
hangs up half-way the first time. On the old code the staging directory was removed on any failure and the second run
fetched the whole file again."""

from __future__ import annotations

import hashlib
import os

import pytest

from model_fetch import run_module
from stand_ins.hostile_http import hostile_origin
from stand_ins.tiny_model import write_tiny_model

SHARD = "model.safetensors"


def model(tmp_path):
    root = write_tiny_model(str(tmp_path / "web"), seed=77, hidden=256, vocab=1024)  # a 2 MiB shard
    sums = dict((name, hashlib.sha256(open(os.path.join(root, name), "rb").read()).hexdigest())
                for name in os.listdir(root))
    return root, sums


def staging(store):
    [entry] = [name for name in os.listdir(store / "tiny") if name.startswith(".staging-")]
    return store / "tiny" / entry


def place(capsys, server, store, sums):
    return run_module(capsys, store=str(store), name="tiny", source=server.url + "/", sha256=sums, min_free_disk_gib=0)


def test_an_interrupted_transfer_is_gone_on_from_by_the_next_run(capsys, tmp_path):
    root, sums = model(tmp_path)
    size = os.path.getsize(os.path.join(root, SHARD))
    store = tmp_path / "store"
    with hostile_origin(root, {SHARD: "cut"}) as server:
        first = place(capsys, server, store, sums)
        assert first.get("failed") is True, first
        assert "stopped after %d of its %d bytes" % (size // 2, size) in first["msg"], first["msg"]
        assert "bytes that arrived stay in %s" % staging(store) in first["msg"], first["msg"]
        assert os.path.getsize(staging(store) / SHARD) == size // 2
        assert not os.path.lexists(store / "tiny" / "current")
        second = place(capsys, server, store, sums)
        assert second.get("failed") is not True, second
        assert second["resumed_bytes"] >= size // 2, second
        assert server.ranges == [(SHARD, "bytes=%d-" % (size // 2))], server.ranges
        assert server.served(SHARD) == size  # half, then the other half: never the whole file twice
    placed = store / "tiny" / "current" / SHARD
    assert hashlib.sha256(placed.read_bytes()).hexdigest() == sums[SHARD]
    assert not [name for name in os.listdir(store / "tiny") if name.startswith(".staging-")]


def test_bytes_that_do_not_verify_are_not_gone_on_from_twice(capsys, tmp_path):
    root, sums = model(tmp_path)
    store = tmp_path / "store"
    with hostile_origin(root, {SHARD: "cut"}) as server:
        assert place(capsys, server, store, sums).get("failed") is True
        with open(staging(store) / SHARD, "r+b") as handle:  # what arrived was damaged on disk
            handle.write(b"\xff" * 64)
        second = place(capsys, server, store, sums)
        assert second.get("failed") is True, second
        assert "%s has sha256 " % SHARD in second["msg"] and "stay in" not in second["msg"], second["msg"]
        assert not [name for name in os.listdir(store / "tiny") if name.startswith(".staging-")]
        third = place(capsys, server, store, sums)
    assert third.get("failed") is not True, third
    assert "resumed_bytes" not in third


@pytest.mark.parametrize("mode", ["cut-norange", "cut-whole206"])
def test_an_origin_that_answers_a_range_with_the_whole_file_sends_it_again_and_it_verifies(capsys, tmp_path, mode):
    """A 200 without ranges, or a 206 with `Content-Range: bytes 0-<end>/<size>` (the whole file, honestly labelled):
    appended to the half that arrived it would make a file of one and a half times the size; it starts again."""
    root, sums = model(tmp_path)
    size = os.path.getsize(os.path.join(root, SHARD))
    store = tmp_path / "store"
    with hostile_origin(root, {SHARD: mode}) as server:
        assert place(capsys, server, store, sums).get("failed") is True
        second = place(capsys, server, store, sums)
        assert second.get("failed") is not True, second
        assert server.ranges == [(SHARD, "bytes=%d-" % (size // 2))] and server.served(SHARD) == size // 2 + size
    assert hashlib.sha256((store / "tiny" / "current" / SHARD).read_bytes()).hexdigest() == sums[SHARD]


def test_a_file_already_complete_in_staging_is_not_fetched_again(capsys, tmp_path):
    root, sums = model(tmp_path)
    store = tmp_path / "store"
    with hostile_origin(root, {"config.json": "cut"}) as server:
        assert place(capsys, server, store, sums).get("failed") is True
        if not os.path.isfile(staging(store) / SHARD):  # the shard may not have been reached: place it as it arrives
            with open(os.path.join(root, SHARD), "rb") as source, open(staging(store) / SHARD, "wb") as copy:
                copy.write(source.read())
        before = server.served(SHARD)
        second = place(capsys, server, store, sums)
        assert second.get("failed") is not True, second
        assert server.served(SHARD) == before


def test_a_refusal_wins_over_another_files_interruption(capsys, tmp_path):
    """Files arrive in parallel: one origin file hangs up half-way, another sends more than it announced. The cap's
    refusal is what the run reports, and staging goes (nothing of a hostile origin is gone on from)."""
    root, sums = model(tmp_path)
    store = tmp_path / "store"
    with hostile_origin(root, {"config.json": "cut", SHARD: "lying"}) as server:
        result = run_module(capsys, store=str(store), name="tiny", source=server.url + "/", sha256=sums,
                            min_free_disk_gib=0, workers=4)
    assert result.get("failed") is True, result
    assert "sent more than the" in result["msg"] and "stay in" not in result["msg"], result["msg"]
    assert not [name for name in os.listdir(store / "tiny") if name.startswith(".staging-")]


def test_what_an_interrupted_run_left_for_another_revision_goes_before_the_next_fetch(capsys, tmp_path):
    """A branch that moved after an interrupted run: its old commit's staging would hold the disk until some run
    succeeded. It goes before the new revision is fetched (and the disk check counted it as free)."""
    root, sums = model(tmp_path)
    store = tmp_path / "store"
    stale = store / "tiny" / ".staging-sha256-0123456789abcdef"
    stale.mkdir(parents=True)
    (stale / SHARD).write_bytes(b"\0" * 4096)  # a branch's earlier commit, interrupted
    wrong = dict(sums, **{SHARD: "0" * 64})  # this run fails too: the stale staging goes all the same, first
    with hostile_origin(root, {}) as server:
        result = place(capsys, server, store, wrong)
    assert result.get("failed") is True and "%s has sha256" % SHARD in result["msg"], result
    assert not os.path.lexists(stale)


def test_a_range_answered_from_another_offset_is_refused_and_the_next_run_starts_from_zero(capsys, tmp_path):
    """206 from another offset than asked (a broken cache): those bytes neither appended nor written from the start
    (on the old code they were written from the start and kept in staging as if they had arrived in order)."""
    root, sums = model(tmp_path)
    size = os.path.getsize(os.path.join(root, SHARD))
    store = tmp_path / "store"
    with hostile_origin(root, {SHARD: "cut-shifted"}) as server:
        assert place(capsys, server, store, sums).get("failed") is True
        second = place(capsys, server, store, sums)
        assert second.get("failed") is True, second
        assert ("answered the request for its bytes %d- (of %d) with Content-Range bytes %d-%d/%d, not the rest of "
                "the file" % (size // 2, size, size // 4, size - 1, size)) in second["msg"], second["msg"]
        assert "stay in" not in second["msg"] and "\n" not in second["msg"], second["msg"]
        assert not [name for name in os.listdir(store / "tiny") if name.startswith(".staging-")]
        assert not os.path.lexists(store / "tiny" / "current")
        third = place(capsys, server, store, sums)
        assert third.get("failed") is not True, third
        assert "resumed_bytes" not in third
        assert server.ranges == [(SHARD, "bytes=%d-" % (size // 2))]  # the third run asked for the whole file
    assert hashlib.sha256((store / "tiny" / "current" / SHARD).read_bytes()).hexdigest() == sums[SHARD]


def test_a_staged_file_larger_than_the_origin_announces_now_starts_again(capsys, tmp_path):
    """An interrupted run left more bytes than the origin announces now (the file was replaced by a smaller one
    under the same revision label): no Range beyond the end is asked, the file is fetched from its start and
    verifies."""
    root, sums = model(tmp_path)
    size = os.path.getsize(os.path.join(root, SHARD))
    store = tmp_path / "store"
    with hostile_origin(root, {SHARD: "cut"}) as server:
        assert place(capsys, server, store, sums).get("failed") is True
        (staging(store) / SHARD).write_bytes(b"\x01" * (size + 4096))
        second = place(capsys, server, store, sums)
        assert second.get("failed") is not True, second
        assert server.ranges == [], server.ranges
        assert server.served(SHARD) == size // 2 + size
    placed = store / "tiny" / "current" / SHARD
    assert placed.stat().st_size == size and hashlib.sha256(placed.read_bytes()).hexdigest() == sums[SHARD]
