"""A stand-in for the Hugging Face hub's HTTP API, for offline tests of the vllm_model role.

The real hub (huggingface.co) is unreachable from our test machines, so the tests run the REAL
huggingface_hub client against this server. It speaks the part of the hub's API the client uses to
place a model: model info with files metadata (GET /api/models/<repo>/revision/<rev>?blobs=True: the
commit a branch or tag resolves to, each file's size, git blob id and, for LFS files, sha256) and file
download (HEAD and GET /<repo>/resolve/<commit>/<file> with X-Repo-Commit, ETag, Content-Length, and Range as the
hub's CDN answers it: bytes=a- and bytes=a-b),
plus the hub's error codes (RevisionNotFound, RepoNotFound, GatedRepo: X-Error-Code). It never ships in
a role.

Repositories are directories: <root>/<org>/<name>/<commit>/<files...> and <root>/<org>/<name>/refs.json
({"main": "<commit>"}, read again for each answer, so a branch can move while the stand-in runs); a file gated.json
there names the token the repository requires. Metadata is
computed once at start-up, as the hub stores it at push time, and bytes are read from disk per request:
a file changed on disk after start-up is served with the old sha256 announced, which is how the tests
produce a corrupted download. GET /_stand_in/bytes-served answers how many file bytes it has sent, so a test
can count the origin's traffic, and GET /_stand_in/requests the file requests it answered ([method, path], in order),
so a test can show which files a client asked for, and GET /_stand_in/ranges the Range of each GET that had one
([path, range], in order). Usage: python hub_server.py ROOT PORT [CERT KEY] (binds 127.0.0.1; serves HTTPS with CERT
and KEY when given, as a hub behind a TLS-intercepting proxy; prints "ready").

A hostile hub, for the tests that prove the collection refuses one: a file answer.json in a repository's
directory ({"<ref>": {"sha": "<any string>", "unchecked": ["<file>", ...]}}) makes the model info for that
ref announce that sha (a refs.json entry with the same string lets its files be downloaded too) and list the
files named under "unchecked" without any checksum (no LFS sha256, no blob id); a file named under "endless" is
sent (GET) with chunked transfer encoding and no length, without end (1 GiB at most), as a hostile or broken hub would;
"cut": {"<file>": N} makes the first N GETs of that file that reach past its half-way byte (a header read does not; N
larger than the client's retries: every one) announce the full Content-Length of what was asked, then stop at the
half-way byte (no body at all for a request that starts past it) and close the connection, as a broken network or
proxy would. They are counted from the stand-in's start: a test that wants a hub that no longer cuts starts it again
without the answer.
A file named under "redirect" is answered, as the hub answers an LFS file, with a redirect to another host (a CDN):
http://localhost:<port>/_stand_in/cdn/<repo>/<commit>/<file>, which serves it to anyone and records the Authorization
header it was sent (GET /_stand_in/cdn-requests: [[path, header or ""]]), so a test can show a token stays with the
hub.
HubProcess runs the stand-in from a test.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

# What the hub keeps in LFS: weights by pattern, anything else above 10 MB.
LFS_PATTERNS = re.compile(r"\.(safetensors|bin|pt|pth|gguf|ckpt|h5|msgpack)$")
LFS_THRESHOLD = 10 * 1000 * 1000


def _file_metadata(path, name):
    data = open(path, "rb").read()
    entry = {"rfilename": name, "size": len(data),
             "blobId": hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()}
    if LFS_PATTERNS.search(name) or len(data) > LFS_THRESHOLD:
        entry["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
    return entry


def load_repositories(root):
    repositories = {}
    for org in sorted(os.listdir(root)):
        for name in sorted(os.listdir(os.path.join(root, org))):
            directory = os.path.join(root, org, name)
            refs = json.load(open(os.path.join(directory, "refs.json")))
            gated = os.path.join(directory, "gated.json")
            commits = {}
            for commit in sorted(entry for entry in os.listdir(directory) if re.match(r"^[0-9a-f]{40}$", entry)):
                base = os.path.join(directory, commit)
                files = {}
                for folder, _subdirectories, names in os.walk(base):
                    for file_name in names:
                        path = os.path.join(folder, file_name)
                        relative = os.path.relpath(path, base)
                        files[relative] = _file_metadata(path, relative)
                commits[commit] = {"base": base, "files": files}
            answer = os.path.join(directory, "answer.json")
            repositories["%s/%s" % (org, name)] = {
                "refs": refs, "refs_path": os.path.join(directory, "refs.json"), "commits": commits,
                "answers": json.load(open(answer)) if os.path.exists(answer) else {},
                "token": json.load(open(gated))["token"] if os.path.exists(gated) else None}
    return repositories


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    repositories = {}
    served = [0]  # file bytes sent, shared by the server's threads
    requests = []  # [method, path] of each file request, shared by the server's threads
    cdn = []  # [path, Authorization header or ""] of each request to the CDN the redirected files go to
    scheme = "http"
    ranges = []  # [path, Range] of each file GET with a Range header
    served_lock = threading.Lock()

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        sys.stderr.write("hub-stand-in: %s\n" % (format % args))

    def _error(self, status, code, message):
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _repository(self, repo_id):
        repository = self.repositories.get(repo_id)
        if repository is None:
            self._error(401, "RepoNotFound", "Repository not found")
            return None
        if repository["token"] and self.headers.get("Authorization") != "Bearer %s" % repository["token"]:
            self._error(403 if self.headers.get("Authorization") else 401, "GatedRepo",
                        "Access to model %s is restricted." % repo_id)
            return None
        return repository

    def _commit(self, repository, revision):
        # refs.json is read again for each answer: a test can move a branch while the stand-in runs.
        with open(repository["refs_path"]) as refs:
            repository["refs"] = json.load(refs)
        commit = repository["refs"].get(revision, revision)
        if commit not in repository["commits"]:
            self._error(404, "RevisionNotFound", "Invalid rev id: %s" % revision)
            return None
        return commit

    def do_GET(self):  # noqa: N802 - http.server's naming
        self._dispatch()

    def do_HEAD(self):  # noqa: N802
        self._dispatch()

    def _dispatch(self):
        raw = urlsplit(self.path).path
        path = unquote(raw)
        info = re.match(r"^/api/models/([^/]+/[^/]+)/revision/(.+)$", path)
        # Matched before unquoting, as the hub does: the client quotes a revision's '/' as %2F.
        resolve = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", raw)
        if resolve:
            resolve = [unquote(part) for part in resolve.groups()]
        if path in ("/_stand_in/bytes-served", "/_stand_in/requests", "/_stand_in/cdn-requests", "/_stand_in/ranges"):
            with self.served_lock:
                body = json.dumps({"bytes": self.served[0]} if path.endswith("served") else
                                  self.cdn if path.endswith("cdn-requests") else
                                  self.ranges if path.endswith("ranges") else self.requests).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif path.startswith("/_stand_in/cdn/"):
            self._cdn(path[len("/_stand_in/cdn/"):])
        elif info and self.command == "GET":
            self._model_info(info.group(1), info.group(2))
        elif resolve:
            with self.served_lock:
                self.requests.append([self.command, path])
                if self.command == "GET" and self.headers.get("Range"):
                    self.ranges.append([path, self.headers["Range"]])
            self._resolve(*resolve)
        else:
            self._error(404, "EntryNotFound", "no route %s" % path)

    def _model_info(self, repo_id, revision):
        repository = self._repository(repo_id)
        commit = repository and self._commit(repository, revision)
        if not commit:
            return
        answer = repository["answers"].get(revision, {})
        siblings = [dict((key, value) for key, value in entry.items()
                         if entry["rfilename"] not in answer.get("unchecked", ()) or key not in ("lfs", "blobId"))
                    for entry in repository["commits"][commit]["files"].values()]
        body = json.dumps({"id": repo_id, "modelId": repo_id, "sha": answer.get("sha", commit), "private": False,
                           "gated": bool(repository["token"]), "disabled": False, "downloads": 0, "likes": 0,
                           "tags": [], "siblings": siblings}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _resolve(self, repo_id, revision, name):
        repository = self._repository(repo_id)
        commit = repository and self._commit(repository, revision)
        if not commit:
            return
        metadata = repository["commits"][commit]["files"].get(name)
        if metadata is None:
            self._error(404, "EntryNotFound", "%s does not exist at %s" % (name, commit))
            return
        if self.command == "GET" and any(name in answer.get("endless", ()) for answer in repository["answers"].values()):
            self._endless()
            return
        if any(name in answer.get("redirect", ()) for answer in repository["answers"].values()):
            self.send_response(302)
            self.send_header("Location", "%s://localhost:%d/_stand_in/cdn/%s/%s/%s" % (
                self.scheme, self.server.server_address[1], repo_id, commit, name))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = open(os.path.join(repository["commits"][commit]["base"], name), "rb").read()
        etag = metadata["lfs"]["sha256"] if "lfs" in metadata else metadata["blobId"]
        start, end, status = 0, len(data) - 1, 200
        # The hub's CDN honours an open range (bytes=a-, what a client resuming asks) and a closed one (bytes=a-b, what
        # a header read asks): 206 with exactly those bytes, b past the end clipped, a past the end 416.
        ranged = re.match(r"^bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        if ranged and self.command == "GET":
            start, status = int(ranged.group(1)), 206
            end = min(int(ranged.group(2)), len(data) - 1) if ranged.group(2) else len(data) - 1
            if start >= len(data) or end < start:
                self._unsatisfiable(len(data))
                return
        cut = self.command == "GET" and end + 1 > len(data) // 2 and self._cut(repository, name)
        self.send_response(status)
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", '"%s"' % etag)
        self.send_header("Content-Length", str(end + 1 - start))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if self.command == "GET":
            # A cut answer stops at the file's half-way byte (nothing when it starts past it) and hangs up.
            sent = data[start:min(end + 1, len(data) // 2)] if cut else data[start:end + 1]
            self.wfile.write(sent)
            with self.served_lock:
                self.served[0] += len(sent)
            if cut:
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

    def _unsatisfiable(self, size):
        self.send_response(416)
        self.send_header("Content-Range", "bytes */%d" % size)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _cut(self, repository, name):
        """Whether this GET of name is cut (answer.json's "cut": {name: how many of its GETs}), counting it."""
        with self.served_lock:
            for answer in repository["answers"].values():
                left = answer.get("cut", {}).get(name, 0)
                if left:
                    answer["cut"][name] = left - 1
                    return True
        return False

    def _cdn(self, path):
        repo_id, commit, name = "/".join(path.split("/")[:2]), path.split("/")[2], "/".join(path.split("/")[3:])
        with self.served_lock:
            self.cdn.append(["/_stand_in/cdn/" + path, self.headers.get("Authorization") or ""])
        repository = self.repositories.get(repo_id) or {"commits": {}}
        if name not in repository["commits"].get(commit, {}).get("files", {}):
            self._error(404, "EntryNotFound", "no file %s" % path)
            return
        data = open(os.path.join(repository["commits"][commit]["base"], name), "rb").read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(data)

    def _endless(self):
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        block = b"\0" * (1 << 16)
        try:
            for dummy in range((1 << 30) // len(block)):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                with self.served_lock:
                    self.served[0] += len(block)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client hung up: what a capped download does


def hub_repository(root, repo, refs, seed=0, answers=None, token=None):
    """Lay out repository `repo` ("org/name") of the stand-in under root: the tiny model (seed) at every commit refs
    names ({ref: commit}), refs.json, and, when given, answer.json (a hostile hub's answers) and gated.json (the token
    the repository requires)."""
    from stand_ins.tiny_model import write_tiny_model  # the tests' import path; the stand-in itself needs none

    directory = os.path.join(str(root), *repo.split("/"))
    for commit in sorted(set(refs.values())):
        write_tiny_model(os.path.join(directory, commit), seed=seed)
    for name, content in (("refs.json", refs), ("answer.json", answers), ("gated.json", token and {"token": token})):
        if content:
            with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
                json.dump(content, handle)


class HubProcess:
    """The stand-in as a process a test starts and stops, on a free port of 127.0.0.1. prefix: a command the process
    runs under (nsenter into a container's network namespace: its 127.0.0.1 is then the container's)."""

    def __init__(self, root, prefix=(), tls=None, ca_bundle=None):
        """tls: (certificate, key) files to serve HTTPS with; ca_bundle: what requests() and bytes_served() trust then."""
        self.root = root
        self.prefix = list(prefix)
        self.tls = list(tls or ())
        self.context = ssl.create_default_context(cafile=ca_bundle) if tls else None
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.endpoint = "%s://127.0.0.1:%d" % ("https" if tls else "http", self.port)
        self.process = None

    def start(self):
        self.process = subprocess.Popen(self.prefix + [sys.executable, os.path.abspath(__file__), str(self.root),
                                                       str(self.port)] + self.tls,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().strip() == "ready"
        return self

    def stop(self):
        if self.process:
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def bytes_served(self):
        with urllib.request.urlopen(self.endpoint + "/_stand_in/bytes-served", timeout=10,
                                    context=self.context) as response:
            return json.loads(response.read())["bytes"]

    def cdn_requests(self):
        """[(path, Authorization header or "")] of the requests to the CDN the redirected files go to, in order."""
        with urllib.request.urlopen(self.endpoint + "/_stand_in/cdn-requests", timeout=10,
                                    context=self.context) as response:
            return [tuple(request) for request in json.loads(response.read())]

    def requests(self):
        """[(method, path)] of the file requests this run of the stand-in answered, in order."""
        with urllib.request.urlopen(self.endpoint + "/_stand_in/requests", timeout=10, context=self.context) as response:
            return [tuple(request) for request in json.loads(response.read())]

    def ranges(self):
        """[(path, Range header)] of the file GETs with a Range this run of the stand-in answered, in order."""
        with urllib.request.urlopen(self.endpoint + "/_stand_in/ranges", timeout=10) as response:
            return [tuple(request) for request in json.loads(response.read())]


def main(root, port, certificate=None, key=None):
    HubHandler.repositories = load_repositories(root)
    server = ThreadingHTTPServer(("127.0.0.1", int(port)), HubHandler)
    if certificate:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certificate, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        HubHandler.scheme = "https"
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:5])
