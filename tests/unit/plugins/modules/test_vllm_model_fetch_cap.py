"""vllm_model_fetch caps every transfer at what the disk check allowed (free space less vllm_model_min_free_disk_gib)
and at the size its source announced: a hostile HTTP origin (tests/stand_ins/hostile_http.py) that streams without a
length, or sends more than it announced, is cut off as the bytes arrive, the staging directory is removed and the
previous revision stays current; a hub (tests/stand_ins/hub_server.py, the real huggingface_hub client) that streams
a file without end is cut off at the largest size it listed; an S3 object larger than its HEAD announced (the real boto3 against moto's S3 server,
tests/stand_ins/s3_origin.py, its HeadObject answer lowered through boto3's own event hook) is refused before any of
its bytes is written: only the announced bytes are asked for, and the answer's Content-Range names the larger size.
On the old code the endless origin was read until the disk was full. Bytes the hub client's hf_xet writes past its HTTP
client (a stand-in writer, below) are caught by the module watching staging while the client runs in a child process,
which is killed; on the old code they were written unwatched until the writer stopped by itself.

The store's free space is fixed for these tests (vllm_model_store.free_bytes patched to 8 MiB): the cap is what the
disk check allowed, and the machine's free space changes under other runs."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_s3
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as rules

from stand_ins.hostile_http import hostile_origin
from stand_ins.hub_server import HubProcess
from stand_ins.s3_origin import REGION, S3Origin
from stand_ins.tiny_model import write_tiny_model
from model_fetch import run_module  # noqa: E402

FREE = 8 << 20


@pytest.fixture
def small_disk(monkeypatch):
    monkeypatch.setattr(rules, "free_bytes", lambda path: FREE)


def sums(directory, names):
    return dict((name, hashlib.sha256(open(os.path.join(directory, name), "rb").read()).hexdigest()) for name in names)


def staying(model_dir, previous):
    assert os.readlink(os.path.join(model_dir, "current")) == previous
    assert sorted(os.listdir(model_dir)) == sorted([".state.json", "current", previous])  # no staging left


@pytest.mark.parametrize("mode, words", [
    ("endless", "the download passed %d bytes, all that the disk check allowed (free space less "
                "vllm_model_min_free_disk_gib), at {url}/v2/model.safetensors, which announced no size; the transfer "
                "was stopped" % FREE),
    ("lying", "{url}/v2/model.safetensors sent more than the {size} bytes it announced; the transfer was stopped"),
])
def test_an_origin_streaming_more_than_allowed_is_cut_off(capsys, tmp_path, small_disk, mode, words):
    root = tmp_path / "origin"
    write_tiny_model(str(root / "v1"), seed=81)
    write_tiny_model(str(root / "v2"), seed=82)
    names = ["config.json", "model.safetensors", "tokenizer_config.json"]
    store = tmp_path / "store"
    with hostile_origin(root, {"v2/model.safetensors": mode}) as origin:
        def place(label):
            return run_module(capsys, store=str(store), name="tiny", source="%s/%s/" % (origin.url, label),
                              sha256=sums(str(root / label), names), min_free_disk_gib=0)

        first = place("v1")
        assert first.get("failed") is not True, first
        refused = place("v2")
        sent = origin.served("v2/model.safetensors")
    assert refused.get("failed"), refused
    size = os.path.getsize(root / "v2" / "model.safetensors")
    assert refused["msg"] == "tiny: vllm_model_models (tiny).source: %s; the previous revision (%s) stays current" % (
        words.format(url=origin.url, size=size), first["revision"]), refused["msg"]
    staying(store / "tiny", first["revision"])
    # The origin was stopped within a few blocks of the cap, not read to its safety ceiling (1 GiB).
    assert sent < FREE + (8 << 20), sent


def test_an_s3_object_larger_than_announced_is_stopped(capsys, tmp_path, small_disk, monkeypatch):
    server = S3Origin().start()
    try:
        model = write_tiny_model(str(tmp_path / "model"), seed=83)
        server.put_model("models", "org/tiny", model)
        make_client = vllm_model_s3.client

        def announcing_less(*args, **kwargs):
            """The real client, whose HeadObject answer for the weights says 100 bytes (boto3's own event hook)."""
            client = make_client(*args, **kwargs)

            def lower(http_response, parsed, model, **_kwargs):
                if parsed.get("ContentLength", 0) > 1000:
                    parsed["ContentLength"] = 100
            client.meta.events.register("after-call.s3.HeadObject", lower)
            return client

        monkeypatch.setattr(vllm_model_s3, "client", announcing_less)
        refused = run_module(capsys, store=str(tmp_path / "store"), name="tiny", source="s3://models/org/tiny",
                             sha256sums="SHA256SUMS", region=REGION, endpoint_url=server.endpoint,
                             access_key_id="AKIASETUPSETUPSETUP0", secret_access_key="setup-only", min_free_disk_gib=0)
    finally:
        server.stop()
    assert refused.get("failed"), refused
    assert refused["msg"].startswith("tiny: vllm_model_models (tiny).source: s3://models/org/tiny/model.safetensors "
                                     "answered the range bytes=0-99 with 100 bytes at bytes 0-99/"), refused["msg"]
    assert "(expected 100 bytes at bytes 0-99/100, " in refused["msg"], refused["msg"]
    assert refused["msg"].endswith("nothing of it was written; the previous revision (none) stays current"), refused[
        "msg"]
    assert [entry for entry in os.listdir(tmp_path / "store" / "tiny") if entry.startswith(".staging")] == []


def test_a_hub_streaming_without_end_is_cut_off(capsys, tmp_path, small_disk):
    root, commit = tmp_path / "hub", "8" * 40
    write_tiny_model(str(root / "org" / "endless" / commit), seed=84)
    (root / "org" / "endless" / "refs.json").write_text(json.dumps({"main": commit}))
    (root / "org" / "endless" / "answer.json").write_text(json.dumps({"main": {"endless": ["model.safetensors"]}}))
    largest = max(os.path.getsize(root / "org" / "endless" / commit / name) for name in os.listdir(
        root / "org" / "endless" / commit))
    hub = HubProcess(root).start()
    try:
        refused = run_module(capsys, store=str(tmp_path / "store"), name="tiny", source="hf://org/endless",
                             revision=commit, endpoint=hub.endpoint, min_free_disk_gib=0)
        served = hub.bytes_served()
    finally:
        hub.stop()
    assert refused.get("failed"), refused
    assert refused["msg"].startswith("tiny: vllm_model_models (tiny).source: %s/org/endless/resolve/%s/model.safetensors "
                                     "sent more than the %d bytes it announced; the transfer was stopped; the previous "
                                     "revision (none) stays current" % (hub.endpoint, commit, largest)), refused["msg"]
    # Stopped at the client's first block (huggingface_hub hands the body on in 10 MiB blocks), not at the 1 GiB the
    # stand-in would send.
    assert served < 32 << 20, served
    assert [entry for entry in os.listdir(tmp_path / "store" / "tiny") if entry.startswith(".staging")] == []


# hf_xet, which the hub client hands Xet-backed files to, fetches and writes them with its own HTTP client: past the
# response hook that counts the client's bodies. The hub stand-in serves no Xet, so these tests replace the client's
# hf_hub_download for the weights by a writer that stands in for hf_xet: it writes the file's bytes into staging
# itself (where the client has hf_xet write, .cache/huggingface/download/<file>.<id>.incomplete), with no HTTP at all,
# in blocks, and notes its process and how far it got in a file outside the store. The weights are announced as
# Xet-backed (xet_backed): the module hands only those to hf_hub_download. On the old code it ran in the
# module's own process, unwatched, until it stopped by itself, and the placement failed later (the weights missing).

def xet_backed(monkeypatch, name):
    """The hub client's metadata (its HEAD) announcing name as Xet-backed, as the hub does for a file in Xet storage:
    the module then hands it to hf_hub_download (and so to hf_xet) rather than fetching it over HTTP itself."""
    import dataclasses

    import huggingface_hub

    real = huggingface_hub.get_hf_file_metadata

    def metadata(url, **kwargs):
        found = real(url, **kwargs)
        return dataclasses.replace(found, xet_file_data=object()) if url.endswith("/" + name) else found

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", metadata)


def xet_stand_in(monkeypatch, tmp_path, files, block, total):
    """hf_hub_download writing `files` files of `block` bytes (one file growing block by block when files is 1) up to
    `total` bytes for the weights; every other file through the real client. Returns the note's path."""
    import time

    import huggingface_hub

    real, note = huggingface_hub.hf_hub_download, tmp_path / "xet-stand-in.json"

    def download(repo_id, filename, local_dir=None, **kwargs):
        if filename != "model.safetensors":
            return real(repo_id, filename, local_dir=local_dir, **kwargs)
        incomplete = os.path.join(local_dir, ".cache", "huggingface", "download")
        os.makedirs(incomplete, exist_ok=True)
        written = 0
        while written < total:
            name = "model.safetensors.%d.incomplete" % (0 if files == 1 else written // block)
            with open(os.path.join(incomplete, name), "ab") as handle:
                handle.write(os.urandom(block))
            written += block
            (tmp_path / "note.tmp").write_text(json.dumps({"pid": os.getpid(), "written": written}))
            os.replace(tmp_path / "note.tmp", note)
            time.sleep(0.01)
        raise OSError("the stand-in for hf_xet stopped by itself after %d bytes" % written)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    xet_backed(monkeypatch, "model.safetensors")
    return note


@pytest.fixture
def tiny_hub(tmp_path):
    from stand_ins.hub_server import hub_repository

    commit = "9" * 40
    hub_repository(tmp_path / "hub", "org/tiny", {"main": commit}, seed=85)
    hub = HubProcess(tmp_path / "hub").start()
    try:
        yield hub, commit
    finally:
        hub.stop()


def place_from(capsys, tmp_path, hub, commit):
    return run_module(capsys, store=str(tmp_path / "store"), name="tiny", source="hf://org/tiny", revision=commit,
                      endpoint=hub.endpoint, min_free_disk_gib=0)


@pytest.mark.parametrize("free, files, words", [
    (FREE, 1, "the hub client wrote (?P<size>[0-9]+) bytes to \\.cache/huggingface/download/model\\.safetensors\\.0\\."
              "incomplete, more than the {largest} bytes of the largest file the hub at {endpoint} listed; the "
              "transfer was stopped: check that hub and what is between it and this host"),
    (256 << 10, 0, "the hub client wrote (?P<size>[0-9]+) bytes to staging from the hub at {endpoint}, past the "
                   "262144 bytes the disk check allowed \\(free space less vllm_model_min_free_disk_gib\\) on top "
                   "of the 0 bytes staged before; the transfer was stopped: check that hub, or free disk space if "
                   "the model needs more"),
])
def test_hub_bytes_written_past_the_http_client_are_capped(capsys, tmp_path, monkeypatch, tiny_hub, free, files, words):
    import re
    import time

    hub, commit = tiny_hub
    monkeypatch.setattr(rules, "free_bytes", lambda path: free)
    largest = os.path.getsize(tmp_path / "hub" / "org" / "tiny" / commit / "model.safetensors")
    block = 65536 if files == 1 else largest  # or many files, each no larger than the largest the hub listed
    note = xet_stand_in(monkeypatch, tmp_path, files, block, 64 << 20)
    started = time.monotonic()
    refused = place_from(capsys, tmp_path, hub, commit)
    took = time.monotonic() - started
    assert refused.get("failed"), refused
    shown = re.fullmatch("tiny: vllm_model_models \\(tiny\\)\\.source: %s; the previous revision \\(none\\) stays "
                         "current" % words.format(largest=largest, endpoint=re.escape(hub.endpoint)), refused["msg"])
    assert shown, refused["msg"]
    assert int(shown["size"]) > (largest if files == 1 else free)
    # The writer ran in a child, which was killed (and reaped) within a few of its blocks, not run to its 64 MiB.
    child = json.loads(note.read_text())
    assert child["pid"] != os.getpid()
    with pytest.raises(ProcessLookupError):
        os.kill(child["pid"], 0)
    assert child["written"] < free + 64 * block, child
    assert took < 20, took
    assert [entry for entry in os.listdir(tmp_path / "store" / "tiny") if entry.startswith(".staging")] == []


def failing_client(monkeypatch, failure):
    """hf_hub_download calling failure() for the weights (in the child that runs the client), the real client for the
    other files."""
    import huggingface_hub

    real = huggingface_hub.hf_hub_download

    def download(repo_id, filename, **kwargs):
        if filename == "model.safetensors":
            failure()
        return real(repo_id, filename, **kwargs)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    xet_backed(monkeypatch, "model.safetensors")


def test_a_client_error_in_the_child_reads_as_before(capsys, tmp_path, monkeypatch, tiny_hub):
    hub, commit = tiny_hub

    def reset():
        raise OSError("the stand-in's connection was reset")

    failing_client(monkeypatch, reset)
    interrupted = place_from(capsys, tmp_path, hub, commit)
    assert interrupted.get("failed"), interrupted
    assert interrupted["msg"].startswith(
        "tiny: the download from %s failed (OSError: the stand-in's connection was reset); the previous revision "
        "(none) stays current; the " % hub.endpoint), interrupted["msg"]
    # An interruption, not a refusal: staging stays for the next run to go on from.
    assert [entry for entry in os.listdir(tmp_path / "store" / "tiny") if entry.startswith(".staging")]


def test_a_client_killed_by_someone_else_is_an_interruption(capsys, tmp_path, monkeypatch, tiny_hub):
    import signal

    hub, commit = tiny_hub
    test = os.getpid()

    def killed():  # as the kernel's out-of-memory killer would; never the test's own process (the old code)
        if os.getpid() == test:
            raise RuntimeError("the client ran in the module's own process")
        os.kill(os.getpid(), signal.SIGKILL)

    failing_client(monkeypatch, killed)
    interrupted = place_from(capsys, tmp_path, hub, commit)
    assert interrupted.get("failed"), interrupted
    shown = interrupted["msg"]
    assert shown.startswith("tiny: the download from %s stopped: its process (" % hub.endpoint), shown
    assert ") was killed by signal SIGKILL, which this module did not send; the previous revision (none) stays " \
           "current; the " in shown, shown


def test_an_archive_that_announces_no_size_is_capped_by_what_the_disk_check_allowed(capsys, tmp_path, small_disk):
    """An archive's origin that announces no size and never stops: its download goes to staging's .archive, so the cap
    is the disk check's allowance, as for a file of a list."""
    root = tmp_path / "origin"
    root.mkdir()
    (root / "v2.tar.gz").write_bytes(b"\x1f\x8b" + b"\0" * 64)
    store = tmp_path / "store"
    with hostile_origin(root, {"v2.tar.gz": "endless"}) as origin:
        refused = run_module(capsys, store=str(store), name="tiny", source=origin.url + "/v2.tar.gz",
                             sha256={"v2.tar.gz": "0" * 64}, min_free_disk_gib=0)
        sent = origin.served("v2.tar.gz")
    assert refused.get("failed"), refused
    assert ("the download passed %d bytes, all that the disk check allowed (free space less vllm_model_min_free_disk_gib)"
            ", at %s/v2.tar.gz, which announced no size; the transfer was stopped" % (FREE, origin.url)) in refused["msg"], \
        refused["msg"]
    assert sorted(os.listdir(store / "tiny")) == [], os.listdir(store / "tiny")  # no staging left
    # Stopped within a few blocks (and the loopback's socket buffers) of the cap, not read to the origin's 1 GiB.
    assert sent < FREE + (16 << 20), sent
