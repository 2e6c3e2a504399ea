"""Two vllm_model_fetch actions on one model at once: the first (a real module process placing an HTTP file list)
holds the model's lock while its origin is slow to answer; the second is refused on one line naming the holder and
changes nothing; the first then completes, verified, and the lock is free again.

The origin is Python's http.server on the loopback whose answers for the weights wait until the test lets them go,
so the first action is still running when the second starts."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time

from stand_ins.tiny_model import write_tiny_model
from model_fetch import run_module  # noqa: E402


class _HeldHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 - http.server's naming
        if self.path.endswith(".safetensors"):
            self.server.asked.set()
            self.server.release.wait(30)
        super().do_GET()


def test_a_second_action_on_a_model_is_refused_while_the_first_holds_its_lock(capsys, tmp_path):
    model = write_tiny_model(str(tmp_path / "web"), seed=71)
    sums = dict((name, hashlib.sha256(open(os.path.join(model, name), "rb").read()).hexdigest())
                for name in os.listdir(model))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_HeldHandler, directory=model))
    server.asked, server.release = threading.Event(), threading.Event()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    args = {"store": str(tmp_path / "store"), "name": "tiny", "source": "http://127.0.0.1:%d/" % server.server_address[1],
            "sha256": sums, "min_free_disk_gib": 0}
    (tmp_path / "args.json").write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    first = subprocess.Popen(
        [sys.executable, "-c", "from ansible_collections.arm_inference.vllm.plugins.modules import vllm_model_fetch;"
         "vllm_model_fetch.main()", str(tmp_path / "args.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
            entry for entry in sys.path if entry)))
    try:
        assert server.asked.wait(60), first.communicate(timeout=5)
        started = time.monotonic()
        second = run_module(capsys, **args)
        assert time.monotonic() - started < 5  # refused at once, not queued
        assert second.get("failed"), second
        assert second["msg"] == ("vllm_model_models (tiny): another run is placing this model on this host (%s is "
                                 "held by pid %d); wait for it to finish, then re-run"
                                 % (tmp_path / "store" / ".tiny.lock", first.pid))
        # The second left the first's staging alone.
        assert [entry for entry in os.listdir(tmp_path / "store" / "tiny") if entry.startswith(".staging-")]
    finally:
        server.release.set()
        out, err = first.communicate(timeout=60)
        server.shutdown()
        server.server_close()
    placed = json.loads(out)
    assert placed.get("failed") is not True and placed["changed"], (placed, err)
    # The lock is free again: a re-run decides from the record.
    again = run_module(capsys, **args)
    assert again.get("failed") is not True and again["changed"] is False, again
