"""A real HTTP origin for the module tests: Python's own http.server on the loopback, serving a directory and
recording each request's method and path (and the Range it asked for, in .ranges), so that a test can show what a
module asked the origin (and that a re-run asked it nothing). http.server ignores Range and sends whole files.

As an origin that needs credentials (an API gateway, a private bucket behind a proxy), it answers 401 to a request
without each header of `require` ({name: value}), its reason phrase repeating the values it was sent; as an origin
that sends files to another host (a CDN), it answers a path of `redirect` ({path: URL}) with a 302 to that URL.
Each request's headers are kept in .headers."""

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
        self.server.headers.append((self.command, self.path, dict(self.headers)))
        if any(self.headers.get(name) != value for name, value in self.server.require.items()):
            # As a careless origin does, its reason phrase repeats what it was sent: a client must not print it.
            self.send_error(401, "Unauthorized (sent %s)" % ", ".join(
                "%s: %s" % (name, self.headers.get(name)) for name in self.server.require))
            return None
        if self.path in self.server.redirect:
            self.send_response(302)
            self.send_header("Location", self.server.redirect[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return super().send_head()


@contextlib.contextmanager
def http_origin(directory, require=None, redirect=None):
    """Serve directory; yields the server, with .url (http://127.0.0.1:<port>), .requests [(method, path)],
    .ranges [(method, path, Range header or None)] and .headers [(method, path, {header: value})]."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_RecordingHandler, directory=str(directory)))
    server.requests, server.ranges, server.headers, server.root = [], [], [], str(directory)
    server.require, server.redirect = dict(require or {}), dict(redirect or {})
    with serving(server):
        yield server
