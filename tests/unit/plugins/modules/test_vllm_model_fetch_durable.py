"""A placed revision is durable before the store records it: every file and directory of the revision is fsynced
before the state file names it, and the model's directory after each rename (the revision into place, the state
file, the current link), so a power loss never leaves a recorded or current revision with missing bytes. A real
HTTP origin (tests/unit/http_origin.py) serves a tiny model; the module runs in-process and os.fsync is observed."""

from __future__ import annotations

import hashlib
import os

from http_origin import http_origin
from stand_ins.tiny_model import write_tiny_model
from model_fetch import run_module  # noqa: E402


def test_the_revision_is_on_disk_before_the_state_names_it_and_current_points_at_it(capsys, tmp_path, monkeypatch):
    model = write_tiny_model(str(tmp_path / "web"), seed=83)
    sums = dict((name, hashlib.sha256(open(os.path.join(model, name), "rb").read()).hexdigest())
                for name in os.listdir(model))
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor):
        events.append(("fsync", os.readlink("/proc/self/fd/%d" % descriptor)))
        return real_fsync(descriptor)

    def replace(source, destination, *args, **kwargs):
        events.append(("replace", str(destination)))
        return real_replace(source, destination, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    store = tmp_path / "store"
    with http_origin(model) as server:
        result = run_module(capsys, store=str(store), name="tiny", source=server.url + "/", sha256=sums,
                            min_free_disk_gib=0)
    assert result.get("failed") is not True and result["changed"], result
    model_dir = str(store / "tiny")
    revision = os.readlink(os.path.join(model_dir, "current"))
    state_written = events.index(("replace", os.path.join(model_dir, ".state.json")))
    synced_before = [path for kind, path in events[:state_written] if kind == "fsync"]
    # Staging was renamed to the revision, so the descriptors opened in staging read back under its old name.
    staged = [path for path in synced_before if "/tiny/." in path and ".state.json." not in path]
    assert sorted(os.path.basename(path) for path in staged if os.path.basename(path) in sums) == sorted(sums), events
    assert any(path.startswith(model_dir + "/.") and os.path.basename(path) not in sums for path in staged), \
        "the staging directory itself was not synced: %s" % events
    # The model's directory is synced after the state file and after the current link replaced the old one.
    after = events[state_written + 1:]
    assert ("fsync", model_dir) in after, events
    current_switched = events.index(("replace", os.path.join(model_dir, "current")))
    assert ("fsync", model_dir) in events[current_switched + 1:], events
    assert os.path.isdir(os.path.join(model_dir, revision))


def test_writeback_starts_while_an_http_file_arrives(capsys, tmp_path, monkeypatch):
    """Every WRITEBACK_BYTES of a file that arrives, the kernel is asked to start writing them (sync_file_range,
    SYNC_FILE_RANGE_WRITE), range after range from the file's start, so its final fdatasync waits for little: with
    it, HTTP placement went from 0.836 to 1.038 of curl's speed on this machine (make model-throughput, 4 x 256 MiB).
    The real call runs here too (recorded, then made)."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store

    model = write_tiny_model(str(tmp_path / "web"), seed=84, hidden=256, vocab=1024)  # a 2 MiB shard
    sums = dict((name, hashlib.sha256(open(os.path.join(model, name), "rb").read()).hexdigest())
                for name in os.listdir(model))
    assert vllm_model_store._SYNC_RANGE is not None, "sync_file_range is missing on this Linux"
    asked, real = [], vllm_model_store._SYNC_RANGE

    def recorded(descriptor, offset, length, flags):
        asked.append((os.path.basename(os.readlink("/proc/self/fd/%d" % descriptor)), offset, length, flags))
        return real(descriptor, offset, length, flags)

    monkeypatch.setattr(vllm_model_store, "_SYNC_RANGE", recorded)
    monkeypatch.setattr(vllm_model_store, "WRITEBACK_BYTES", 256 << 10)
    with http_origin(model) as server:
        result = run_module(capsys, store=str(tmp_path / "store"), name="tiny", source=server.url + "/", sha256=sums,
                            min_free_disk_gib=0)
    assert result.get("failed") is not True, result
    shard = [(offset, length, flags) for name, offset, length, flags in asked if name == "model.safetensors"]
    size = os.path.getsize(os.path.join(model, "model.safetensors"))
    assert shard and all(flags == 2 for dummy, dummy, flags in shard), asked
    assert shard[0][0] == 0 and all(later[0] == earlier[0] + earlier[1] for earlier, later in zip(shard, shard[1:]))
    assert all(length >= 256 << 10 for dummy, length, dummy in shard) and shard[-1][0] + shard[-1][1] <= size
