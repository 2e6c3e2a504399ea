"""A stand-in for vLLM's OpenAI-compatible HTTP server, the upstream of the vllm_gateway tests that run
Debian's real HAProxy on this machine (tests/unit/roles/test_gateway_haproxy.py).

A real vLLM takes minutes to start and a model to load; what the gateway's probes need from its upstream
is only this: /health answers 200, any other path answers a small JSON body, and the server records what
reached it (method, path, headers, how many body bytes, read as Content-Length or chunked says), so a test
can tell whether a refused request got through. A query `?silent=S` holds the answer back S seconds (a
generation silent before its first token), `?stream=N&gap=S` streams N chunks S seconds apart, and
`?hold=S` keeps the request open S seconds (to count concurrent requests). GET /_stand_in/requests lists
the records. Usage: python openai_upstream.py PORT [API_KEY] (binds 127.0.0.1; prints "ready"); with API_KEY,
a request under /v1 without "Authorization: Bearer API_KEY" gets 401, as vLLM's --api-key answers it. It never
ships in a role.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

RECORDS = []
LOCK = threading.Lock()
API_KEY = []
# Bodies are counted, not kept; a body past this many bytes is counted up to here and the connection closed.
READ_LIMIT = 80 * 1024 * 1024


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: the test reads the records instead
        pass

    def _read_body(self, record):
        """Counts the body into record["body_bytes"] as it arrives, so a body still coming is counted."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while record["body_bytes"] < READ_LIMIT:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return
                record["body_bytes"] += len(self.rfile.read(size))
                self.rfile.readline()
            return
        length = min(int(self.headers.get("Content-Length") or 0), READ_LIMIT)
        while record["body_bytes"] < length:
            chunk = self.rfile.read(min(65536, length - record["body_bytes"]))
            if not chunk:
                return
            record["body_bytes"] += len(chunk)

    def _answer(self, status, payload):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self):
        parts = urlsplit(self.path)
        query = {name: float(values[0]) for name, values in parse_qs(parts.query).items()
                 if name in ("silent", "stream", "gap", "hold")}
        if parts.path == "/_stand_in/requests":
            with LOCK:
                return self._answer(200, RECORDS)
        if parts.path == "/health":
            return self._answer(200, {})
        if API_KEY and parts.path.startswith("/v1") and self.headers.get("Authorization") != "Bearer " + API_KEY[0]:
            return self._answer(401, {"error": "Unauthorized"})
        record = {"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                  "started": time.time(), "body_bytes": 0}
        with LOCK:
            RECORDS.append(record)
        self._read_body(record)
        time.sleep(query.get("silent", 0) + query.get("hold", 0))
        if "stream" in query:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for index in range(int(query["stream"])):
                if index:
                    time.sleep(query.get("gap", 0))
                data = b"data: {\"index\": %d}\n\n" % index
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return None
        return self._answer(200, {"object": "stand-in", "path": parts.path})

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle


def main():
    API_KEY.extend(sys.argv[2:3])
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
