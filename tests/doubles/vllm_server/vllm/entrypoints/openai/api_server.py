"""Test double of vllm.entrypoints.openai.api_server, for the aarch64 molecule scenario only.

The real vLLM cannot run under qemu-user on our test machines (no aarch64 CPU PyTorch reachable; see
tests/doubles/vllm_server/README.md). This stands in for it with the same command line, /health,
/v1/models behind --api-key, and one thread bound to rank 0 of VLLM_CPU_OMP_THREADS_BIND.
"""

import argparse
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _cpus(text):
    cpus = set()
    for part in text.split(","):
        first, dummy, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def _bind_worker(cpus, ready):
    # pid 0 = the calling thread, as vLLM's per-thread OpenMP binding does.
    os.sched_setaffinity(0, cpus)
    ready.set()
    while True:
        time.sleep(3600)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--served-model-name")
    parser.add_argument("--host", default="")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key", action="append")
    args, _unknown = parser.parse_known_args()
    keys = [key for key in (args.api_key or [os.environ.get("VLLM_API_KEY")]) if key]
    bind = os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "auto")
    if bind not in ("auto", "nobind"):
        ready = threading.Event()
        threading.Thread(target=_bind_worker, args=(_cpus(bind.split("|")[0]), ready), daemon=True).start()
        if not ready.wait(30):
            sys.exit("could not bind a worker thread to %s" % bind)
    model_name = args.served_model_name or args.model

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status, body):
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self):  # noqa: N802 (http.server's naming)
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/v1/models":
                given = self.headers.get("Authorization", "")
                if keys and not any(hmac.compare_digest(given, "Bearer " + key) for key in keys):
                    self._send(401, {"error": "Unauthorized"})
                else:
                    self._send(200, {"object": "list", "data": [{"id": model_name, "object": "model"}]})
            else:
                self._send(404, {"error": "not found"})

        def log_message(self, *_args):
            pass

    print("test double of vLLM serving %s on %s:%d" % (model_name, args.host, args.port), flush=True)
    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
