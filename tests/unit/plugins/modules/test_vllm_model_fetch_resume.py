"""A transfer that stops early is gone on from, not started again: what arrived stays in the revision's staging
directory, and the next run asks an HTTP(S) origin for the rest of the file (a Range request) and fetches no file that
is already complete; every byte is still verified against the pins, and what fails its checksum is removed, so the run
after that starts from zero. Against the hostile origin stand-in (tests/stand_ins/hostile_http.py), whose `cut` file
hangs up half-way the first time. On the old code the staging directory was removed on any failure and the second run
fetched the whole file again."""

from __future__ import annotations

import hashlib
import os
import tarfile

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as rules
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


# An HTTP(S) archive is one transfer: what arrived of it stays in staging's reserved .archive directory and the next
# run for that revision asks for the rest. On the old code the partial archive was removed on any failure, so the next
# run sent no Range and fetched the whole archive again.
ARCHIVE = "tiny.tar.gz"


def archive(tmp_path, name=ARCHIVE, seed=77):
    """web/name: a tar.gz of a tiny model with a 2 MiB shard (random bytes: the archive is about as large); its
    sha256."""
    web = tmp_path / "web"
    web.mkdir(exist_ok=True)
    root = write_tiny_model(str(tmp_path / ("model-%d" % seed)), seed=seed, hidden=256, vocab=1024)
    with tarfile.open(web / name, "w:gz") as tar:
        tar.add(root, arcname="tiny")
    return web, hashlib.sha256((web / name).read_bytes()).hexdigest()


def place_archive(capsys, server, store, digest, name=ARCHIVE):
    return run_module(capsys, store=str(store), name="tiny", source="%s/%s" % (server.url, name),
                      sha256={name: digest}, min_free_disk_gib=0)


def partial(store):
    return staging(store) / ".archive" / "archive"


def placed_shard(store, tmp_path, seed=77):
    data = (store / "tiny" / "current" / SHARD).read_bytes()
    return data == (tmp_path / ("model-%d" % seed) / SHARD).read_bytes()


def test_an_interrupted_archive_is_gone_on_from_with_one_range_request(capsys, tmp_path):
    web, digest = archive(tmp_path)
    size = os.path.getsize(web / ARCHIVE)
    store = tmp_path / "store"
    with hostile_origin(web, {ARCHIVE: "cut"}) as server:
        first = place_archive(capsys, server, store, digest)
        assert first.get("failed") is True, first
        assert "stopped after %d of its %d bytes" % (size // 2, size) in first["msg"], first["msg"]
        assert "the %d bytes that arrived stay in %s and the next run goes on from there" % (
            size // 2, staging(store)) in first["msg"], first["msg"]
        assert os.path.getsize(partial(store)) == size // 2
        assert not os.path.lexists(store / "tiny" / "current")
        second = place_archive(capsys, server, store, digest)
        assert second.get("failed") is not True, second
        assert second["resumed_bytes"] == size // 2, second
        assert server.ranges == [(ARCHIVE, "bytes=%d-" % (size // 2))], server.ranges
        assert server.served(ARCHIVE) == size  # half, then the other half: about the archive once, not 1.5 times
    assert placed_shard(store, tmp_path)
    record = rules.read_state(str(store / "tiny"))["revisions"][second["revision"]]
    assert ".archive/archive" not in record["files"] and SHARD in record["files"]
    assert sorted(os.listdir(store / "tiny")) == [".state.json", "current", second["revision"]]


def test_a_damaged_partial_archive_is_refused_then_a_clean_run_places(capsys, tmp_path):
    web, digest = archive(tmp_path)
    store = tmp_path / "store"
    with hostile_origin(web, {ARCHIVE: "cut"}) as server:
        assert place_archive(capsys, server, store, digest).get("failed") is True
        with open(partial(store), "r+b") as handle:  # what arrived was damaged on disk
            handle.write(b"\xff" * 64)
        second = place_archive(capsys, server, store, digest)
        assert second.get("failed") is True, second
        assert second["msg"].startswith("tiny: %s has sha256 " % ARCHIVE), second["msg"]
        assert "stay in" not in second["msg"], second["msg"]
        assert os.listdir(store / "tiny") == []  # the partial archive went with staging
        third = place_archive(capsys, server, store, digest)
    assert third.get("failed") is not True, third
    assert "resumed_bytes" not in third
    assert placed_shard(store, tmp_path)


def test_a_partial_archive_of_another_revision_goes_and_counts_as_free(capsys, tmp_path, monkeypatch):
    """The source moved to another archive after an interrupted run: the old revision's partial archive goes before the
    new one is fetched, and the disk check counted it as free (the free space given here is short of the new archive's
    twice by less than the partial archive holds)."""
    web, old = archive(tmp_path, "old.tar.gz", seed=5)
    web, new = archive(tmp_path, ARCHIVE)
    store = tmp_path / "store"
    with hostile_origin(web, {"old.tar.gz": "cut"}) as server:
        assert place_archive(capsys, server, store, old, name="old.tar.gz").get("failed") is True
        left = staging(store)
        kept = os.path.getsize(partial(store))
        assert kept == os.path.getsize(web / "old.tar.gz") // 2
        monkeypatch.setattr(rules, "free_bytes", lambda path: 2 * os.path.getsize(web / ARCHIVE) - kept // 2)
        result = place_archive(capsys, server, store, new)
    assert result.get("failed") is not True, result
    assert not os.path.lexists(left)
    assert sorted(os.listdir(store / "tiny")) == [".state.json", "current", result["revision"]]
    assert placed_shard(store, tmp_path)


@pytest.mark.parametrize("kind", ["files", "archive"])
@pytest.mark.parametrize("mode", ["cut-norange", "cut-whole206"])
def test_an_origin_that_answers_a_range_with_the_whole_file_sends_it_again(capsys, tmp_path, kind, mode):
    """A file of a list, or an archive: the origin answers the Range with the whole of it again, a 200 without ranges
    or a 206 with `Content-Range: bytes 0-<end>/<size>` (the whole file, honestly labelled): appended to the half
    that arrived it would make a file of one and a half times the size; it starts again."""
    if kind == "files":
        root, pins = model(tmp_path)
        web, name, placer, source = root, SHARD, place, tmp_path / "web" / SHARD
    else:
        (web, pins), name, placer = archive(tmp_path), ARCHIVE, place_archive
        source = tmp_path / "model-77" / SHARD
    size = os.path.getsize(os.path.join(web, name))
    store = tmp_path / "store"
    with hostile_origin(web, {name: mode}) as server:
        assert placer(capsys, server, store, pins).get("failed") is True
        second = placer(capsys, server, store, pins)
        assert second.get("failed") is not True, second
        assert server.ranges == [(name, "bytes=%d-" % (size // 2))] and server.served(name) == size // 2 + size
    assert (store / "tiny" / "current" / SHARD).read_bytes() == source.read_bytes()


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


# The hub: the REAL huggingface_hub client against the hub stand-in (tests/stand_ins/hub_server.py), whose answer.json
# "cut" hangs up half-way through model.safetensors. The client's own retry goes on from what it holds with a Range
# request within a run; it holds whole blocks only (its http_get reads the body in DOWNLOAD_CHUNK_SIZE blocks, 10 MiB by
# default in 2.4, which the module sets to HUB_BLOCK, 1 MiB, in its download child; what arrived of the block in transit
# is lost and sent again). Across runs, huggingface_hub 2.4 keeps no partial file (each download goes to a
# process-unique .incomplete file, removed when it fails), so the module keeps its own in staging's .cache and hands
# it to the client's http_get to go on from; on the old code the second run fetched the whole file again.
HUB_COMMIT = "7" * 40


def hub_model(tmp_path, cuts):
    """The stand-in's root with org/tiny (a 4 MiB shard) at HUB_COMMIT, the shard cut `cuts` times; the files' sizes."""
    from stand_ins.hub_server import hub_repository

    root = tmp_path / "hub"
    hub_repository(root, "org/tiny", {"main": HUB_COMMIT}, answers={"main": {"cut": {SHARD: cuts}}} if cuts else None)
    directory = root / "org" / "tiny" / HUB_COMMIT
    write_tiny_model(str(directory), seed=79, hidden=512, vocab=1024)
    return root, dict((name, os.path.getsize(directory / name)) for name in os.listdir(directory))


def place_hub(capsys, store, hub, **extra):
    return run_module(capsys, store=str(store), name="tiny", source="hf://org/tiny", revision=HUB_COMMIT,
                      endpoint=hub.endpoint, min_free_disk_gib=0, **extra)


def kept(size):
    """What the client holds of the shard when the stand-in cuts it half-way: its whole blocks."""
    from ansible_collections.arm_inference.vllm.plugins.modules.vllm_model_fetch import HUB_BLOCK

    return size // 2 // HUB_BLOCK * HUB_BLOCK


def shard_ranges(hub):
    return [header for path, header in hub.ranges() if path.endswith("/" + SHARD)]


def test_a_hub_file_cut_once_is_gone_on_from_by_the_clients_own_retry(capsys, tmp_path):
    import struct

    from stand_ins.hub_server import HubProcess
    from test_vllm_model_fetch_serving import facts, fit

    root, sizes = hub_model(tmp_path, cuts=1)
    size = sizes[SHARD]
    with open(root / "org" / "tiny" / HUB_COMMIT / SHARD, "rb") as handle:
        header = struct.unpack("<Q", handle.read(8))[0]
    hub = HubProcess(root).start()
    try:
        placed = place_hub(capsys, tmp_path / "store", hub, fit=dict(fit(facts("graviton4-c8g-16xlarge")),
                                                                     serve_model="tiny"))
        served, ranges = hub.bytes_served(), shard_ranges(hub)
    finally:
        hub.stop()
    assert placed.get("failed") is not True, placed
    # The header reads (bytes=0-7, then the header) and the resuming retry: nothing else asked for a range of it.
    assert kept(size) > 0 and ranges == ["bytes=0-7", "bytes=0-%d" % (8 + header - 1), "bytes=%d-" % kept(size)], ranges
    # Every file once, plus what the fit check read before: config.json (asked with a closed range past its end, sent
    # whole), the shard's 8-byte length and its 8 + header bytes, plus what the client lost of the block in transit at
    # the cut. Not the shard again (1.5 times): half, then from its last whole block.
    lost = size // 2 - kept(size)
    assert served == sum(sizes.values()) + sizes["config.json"] + 8 + 8 + header + lost, (served, sizes, header)
    current = tmp_path / "store" / "tiny" / "current"
    assert (current / SHARD).read_bytes() == (root / "org" / "tiny" / HUB_COMMIT / SHARD).read_bytes()


def test_a_hub_file_cut_every_time_is_gone_on_from_by_the_next_run(capsys, tmp_path):
    from stand_ins.hub_server import HubProcess

    root, sizes = hub_model(tmp_path, cuts=1000)
    size, store = sizes[SHARD], tmp_path / "store"
    hub = HubProcess(root).start()
    try:
        first = place_hub(capsys, store, hub)
        served, ranges = hub.bytes_served(), shard_ranges(hub)
    finally:
        hub.stop()
    retries = len(ranges)
    assert first.get("failed") is True, first
    assert first["msg"].startswith("tiny: the download from %s failed (RemoteProtocolError: " % hub.endpoint), first
    assert "; the previous revision (none) stays current; the " in first["msg"], first["msg"]
    assert first["msg"].endswith(" bytes that arrived stay in %s and the next run goes on from there" % staging(store))
    # The client tried again from the blocks it held, got nothing more, and gave up: they stay in staging's .cache.
    assert ranges and set(ranges) == {"bytes=%d-" % kept(size)}, ranges
    partials = [os.path.join(folder, name) for folder, dummy, names in os.walk(staging(store) / ".cache")
                for name in names if name.startswith(SHARD)]
    assert [os.path.getsize(path) for path in partials] == [kept(size)], partials
    assert not os.path.lexists(store / "tiny" / "current")
    (root / "org" / "tiny" / "answer.json").unlink()  # the hub no longer cuts
    hub = HubProcess(root).start()
    try:
        second = place_hub(capsys, store, hub)
        served += hub.bytes_served()
        ranges = shard_ranges(hub)
    finally:
        hub.stop()
    assert second.get("failed") is not True, second
    assert second["resumed_bytes"] >= kept(size), second
    assert ranges == ["bytes=%d-" % kept(size)], ranges
    # About the shard once over both runs, not 1.5 times: what the client lost of the block in transit at each break
    # (the first answer, then each of its retries in the first run) is all that was sent twice.
    lost = (size // 2 - kept(size)) * (1 + retries)
    assert lost < 1 << 20 and served == sum(sizes.values()) + lost, (served, sizes, retries)
    assert (store / "tiny" / "current" / SHARD).read_bytes() == (root / "org" / "tiny" / HUB_COMMIT / SHARD).read_bytes()
    assert sorted(os.listdir(store / "tiny")) == sorted([".state.json", "current", HUB_COMMIT])
