"""A stand-in for a hostile or broken HTTP(S) model origin (a compromised web server, a misconfigured proxy), for the
tests that prove vllm_model caps what a download may write. Real origins are not reachable from our test machines,
and no real server misbehaves on request, so this one does, on the loopback. It never ships in a role.

It serves a directory as a plain origin does (GET and HEAD with Content-Length), except for the files named in
`hostile` ({file name: mode}):
  endless  HEAD announces no length; GET answers with chunked transfer encoding and never stops sending (until the
           client hangs up, or `ceiling` bytes, a safety stop for a client that does not).
  lying    HEAD announces the file's real size; GET sends the file and then more bytes, chunked, without a length.
  cut      the first GET announces the whole file but sends half of it and hangs up (a broken connection); later
           GETs answer as a plain origin does.
  cut-norange  as cut, but later GETs ignore a Range header and send the whole file (an origin without ranges).
  cut-whole206 as cut, but later ranged GETs answer 206 with the whole file and `Content-Range: bytes 0-<end>/<size>`
           (a proxy that answers a range with the whole file, honestly labelled).
  cut-shifted  as cut, but later ranged GETs answer 206 from another offset than asked (half of it), with that offset
           in Content-Range (a broken cache or proxy: appending those bytes would corrupt the file).
  gone     HEAD answers as for the file; GET answers 404 (a file removed between the listing and the read, as during
           an origin's deploy).
A plain origin's GET honours `Range: bytes=<first>-` with 206 and Content-Range, as real servers do; every Range
header received is kept in `ranges` ([(file, header)]).
served() tells how many body bytes it has sent for a file, so a test can show the client stopped early.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

CHUNK = 1 << 16
CUT = ("cut", "cut-norange", "cut-whole206", "cut-shifted")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_HEAD(self):  # noqa: N802 - http.server's naming
        self._answer(body=False)

    def do_GET(self):  # noqa: N802
        self._answer(body=True)

    def _answer(self, body):
        name = unquote(urlsplit(self.path).path).lstrip("/")
        path = os.path.join(self.server.directory, name)
        if ".." in name.split("/") or not os.path.isfile(path) or (body and self.server.hostile.get(name) == "gone"):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = open(path, "rb").read()
        mode = self.server.hostile.get(name)
        if body and mode in CUT and name not in self.server.cut:
            self.server.cut.add(name)
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self._count(name, self.wfile.write(data[:len(data) // 2]))
            self.wfile.flush()
            self.close_connection = True
            return
        ranged = re.match(r"^bytes=(\d+)-$", self.headers.get("Range", "")) if body else None
        if self.headers.get("Range"):
            with self.server.lock:
                self.server.ranges.append((name, self.headers["Range"]))
        if ranged and mode != "cut-norange" and int(ranged.group(1)) < len(data):
            start = {"cut-whole206": 0, "cut-shifted": int(ranged.group(1)) // 2}.get(mode, int(ranged.group(1)))
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            self._count(name, self.wfile.write(data[start:]))
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if mode in (None,) + CUT or (mode == "lying" and not body):
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self._count(name, self.wfile.write(data))
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if not body:
            return
        try:
            if mode == "lying":
                self._chunk(name, data)
            while self.server.sent.get(name, 0) < self.server.ceiling:
                self._chunk(name, b"\0" * CHUNK)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up: what a capped download does

    def _chunk(self, name, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self._count(name, len(data))

    def _count(self, name, amount):
        with self.server.lock:
            self.server.sent[name] = self.server.sent.get(name, 0) + amount


@contextlib.contextmanager
def hostile_origin(directory, hostile, ceiling=1 << 30):
    """Serve directory with the hostile files; yields the server, with .url (http://127.0.0.1:<port>) and
    .served(name)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads, server.block_on_close = True, False  # a handler still writing never holds the test
    server.directory, server.hostile, server.ceiling = str(directory), dict(hostile), ceiling
    server.sent, server.lock, server.cut, server.ranges = {}, threading.Lock(), set(), []
    server.served = lambda name: server.sent.get(name, 0)
    with serving(server):
        yield server


@contextlib.contextmanager
def serving(server):
    """Run an http.server on the loopback in a thread for the block; sets server.url."""
    server.url = "http://127.0.0.1:%d" % server.server_address[1]
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
