"""A real HTTP origin for the module tests: Python's own http.server on the loopback, serving a directory and
recording each request's method and path (and the Range it asked for, in .ranges), so that a test can show what a
module asked the origin (and that a re-run asked it nothing). http.server ignores Range and sends whole files."""

from __future__ import annotations

import contextlib
import functools
import http.server

from stand_ins.hostile_http import serving


class _RecordingHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send_head(self):
        self.server.requests.append((self.command, self.path))
        self.server.ranges.append((self.command, self.path, self.headers.get("Range")))
        return super().send_head()


@contextlib.contextmanager
def http_origin(directory):
    """Serve directory; yields the server, with .url (http://127.0.0.1:<port>), .requests [(method, path)] and
    .ranges [(method, path, Range header or None)]."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_RecordingHandler, directory=str(directory)))
    server.requests, server.ranges, server.root = [], [], str(directory)
    with serving(server):
        yield server
