"""Stands in for the network between a host and its S3 store when it breaks, and for an S3-compatible store that
answers a ranged GET wrongly: a loopback HTTP proxy in front of moto's S3 server (tests/stand_ins/s3_origin.py),
which alone never breaks a connection or misanswers a range. Every request is forwarded as it came (its Host header
too, so a SigV4 signature still holds), every GET is recorded with its Range header, and a fault set for one object's
range changes only that answer:

- "cut": the headers and half the body of the part, then the connection is closed (a network that drops);
- "cut-once": as "cut" the first time the range is asked for, then a plain answer (a network that drops once);
- "short": half the part, announced as such (Content-Length and Content-Range of half the range asked for);
- "elsewhere": the bytes asked for, but their Content-Range names the range one byte further on.

It never ships in a role.
"""

from __future__ import annotations

import http.client
import http.server
import re
import threading
from urllib.parse import urlsplit

_HOP = ("connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade")


class S3Proxy:
    def __init__(self, upstream):
        self.upstream = urlsplit(upstream)
        self.faults = {}  # (path, "bytes=a-b"): "cut" | "cut-once" | "short" | "elsewhere"
        self.gets = []  # (path, Range header or None), in the order they came
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                path = urlsplit(self.path).path
                asked = self.headers.get("Range")
                fault = None
                with proxy._lock:
                    if self.command == "GET":
                        proxy.gets.append((path, asked))
                        fault = proxy.faults.get((path, asked))
                        if fault == "cut-once":
                            proxy.faults.pop((path, asked))
                            fault = "cut"
                upstream = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
                    response = upstream.getresponse()
                    data = response.read()
                    headers = [(key, value) for key, value in response.getheaders() if key.lower() not in _HOP
                               and key.lower() not in ("content-length", "content-range")]
                    content_range = response.getheader("Content-Range")
                    announced = len(data) if self.command != "HEAD" else int(response.getheader("Content-Length") or 0)
                    if fault and response.status == 206:
                        first, last, total = (int(number) for number in re.match(
                            r"bytes (\d+)-(\d+)/(\d+)", content_range).groups())
                        if fault == "short":
                            data = data[:len(data) // 2]
                            announced, content_range = len(data), "bytes %d-%d/%d" % (first, first + len(data) - 1,
                                                                                      total)
                        elif fault == "elsewhere":
                            content_range = "bytes %d-%d/%d" % (first + 1, last + 1, total)
                        elif fault == "cut":
                            data = data[:len(data) // 2]
                    self.send_response(response.status)
                    for key, value in headers:
                        self.send_header(key, value)
                    if content_range:
                        self.send_header("Content-Range", content_range)
                    self.send_header("Content-Length", str(announced))
                    if fault == "cut":
                        self.send_header("Connection", "close")
                        self.close_connection = True
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream.close()

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]

    def ranges(self, path):
        """The Range headers of the GETs of path, in order."""
        with self._lock:
            return [asked for got, asked in self.gets if got == path]

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
