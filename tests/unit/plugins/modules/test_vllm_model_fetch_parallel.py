"""An HTTP(S) file list is fetched like the hub's files: vllm_model_download_workers files at once, each hashed as its
bytes arrive, so the verification reads no file a second time. A real HTTP origin (Python's http.server on the
loopback, one thread per request) that holds each file's answer until the given number of requests are in flight at
once proves the parallelism: on the old code (one file after another) the first request waited alone and the
placement failed. The bytes are still checked: a file whose bytes differ from its pin is refused."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import threading

import pytest

from model_fetch import run_module
from stand_ins.hostile_http import serving
from stand_ins.tiny_model import write_tiny_model
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store


class _GatedHandler(http.server.SimpleHTTPRequestHandler):
    """Answers a GET only once `together` GETs are in flight (or after 5 s, for the old code's single request)."""

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 - http.server's naming
        self.server.arrived.wait(self.server.together)
        super().do_GET()


def origin(directory, together):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_GatedHandler, directory=str(directory)))
    barrier = threading.Barrier(together, timeout=5)

    class Arrivals:
        def wait(self, dummy):
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                server.alone = True

    server.arrived, server.together, server.alone = Arrivals(), together, False
    return server


@pytest.fixture()
def model(tmp_path):
    root = write_tiny_model(str(tmp_path / "web"), seed=71, shards=3)
    sums = dict((name, hashlib.sha256(open(os.path.join(root, name), "rb").read()).hexdigest())
                for name in os.listdir(root))
    return root, sums


def test_the_files_are_fetched_at_once_and_hashed_as_they_arrive(capsys, tmp_path, model, monkeypatch):
    root, sums = model
    shards = [name for name in sums if name.endswith(".safetensors")]
    assert len(shards) == 3
    read_again = []
    real = vllm_model_store.file_sha256
    monkeypatch.setattr(vllm_model_store, "file_sha256", lambda path, *args: read_again.append(path) or real(path))
    server = origin(root, together=3)
    with serving(server):
        result = run_module(capsys, store=str(tmp_path / "store"), name="tiny", source="http://127.0.0.1:%d/"
                            % server.server_address[1], sha256=sums, min_free_disk_gib=0, workers=3)
    assert result.get("failed") is not True, result
    assert not server.alone, "the origin saw fewer than 3 requests in flight at once"
    assert read_again == [], "verified by reading the files again: %s" % read_again
    placed = tmp_path / "store" / "tiny" / "current"
    assert all(hashlib.sha256((placed / name).read_bytes()).hexdigest() == digest for name, digest in sums.items())


def test_a_file_whose_bytes_differ_from_its_pin_is_still_refused(capsys, tmp_path, model):
    root, sums = model
    shard = sorted(name for name in sums if name.endswith(".safetensors"))[1]
    with open(os.path.join(root, shard), "r+b") as handle:  # same size, other bytes
        handle.seek(100)
        handle.write(b"\x01\x02\x03")
    server = origin(root, together=1)
    with serving(server):
        result = run_module(capsys, store=str(tmp_path / "store"), name="tiny", source="http://127.0.0.1:%d/"
                            % server.server_address[1], sha256=sums, min_free_disk_gib=0, workers=4)
    assert result.get("failed") is True, result
    assert "%s has sha256 " % shard in result["msg"] and "expected %s" % sums[shard] in result["msg"], result["msg"]
    assert not os.path.lexists(tmp_path / "store" / "tiny" / "current")
