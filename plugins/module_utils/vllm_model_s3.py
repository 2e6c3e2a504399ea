# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""S3 for the vllm_model role: the boto3 client of an s3:// source or a fleet mirror, one-line errors naming
the variable behind a failure, and the mirror a fleet fetches a model from once.

boto3 is imported only when a client is made: a re-run that decides from the store's record never needs it.
"""

from __future__ import annotations

import json
import os
import threading
import time

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as store_rules
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_model_store import ModelStoreError

SUMS = "SHA256SUMS"
REFS = "refs.json"
_DENIED = ("AccessDenied", "403", "AllAccessDisabled")
# The request was not authenticated at all: a grant cannot help, the credentials are wrong.
_BAD_SECRET = ("SignatureDoesNotMatch",)
_BAD_KEY_ID = ("InvalidAccessKeyId",)
_MISSING = ("NoSuchKey", "404", "NotFound")
# A file is fetched in parts of PART_BYTES (the last one shorter), each a ranged GET written at its offset, up to
# PARTS_AT_ONCE of one file at once (files themselves go vllm_model_download_workers at once); a part is recorded
# done in the file's parts record once all its bytes are written, and the next run fetches only the parts not
# recorded.
PART_BYTES = 64 << 20
PARTS_AT_ONCE = 4
# A part whose body breaks (the connection dropped, the answer ended early) is asked for again within the run, up to
# PART_ATTEMPTS times in all, PART_RETRY_SECONDS * attempt apart: one dropped connection in a 100 GB model costs a
# part, not the run. A GET botocore gave up on (its own retries) or a refusal is not asked again.
PART_ATTEMPTS = 3
PART_RETRY_SECONDS = 1.0
_BLOCK = 1 << 20
_MAX_RECORD = 1 << 20


def url(bucket, key):
    return "s3://%s/%s" % (bucket, key)


def client(model, ca_bundle=None, where="the host", connections=PARTS_AT_ONCE):
    """A boto3 S3 client for model's settings (region, endpoint_url, keys): the keys given (module arguments,
    never logged), else boto3's own chain (the instance profile on EC2). Short timeouts and few retries, so
    an unreachable endpoint fails in seconds. connections: the requests it makes at once (files times parts), each
    kept open for the next part."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError as error:
        raise ModelStoreError("%s: boto3 is not importable on %s (%s); %s" % (
            model["name"], where, error, "run the role, which installs it into vllm_model_tools_venv"
            if where == "the host" else "install boto3 into the Python that runs ansible-playbook"))
    config = Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 2, "mode": "standard"},
                    max_pool_connections=max(10, connections))
    return boto3.session.Session().client(
        "s3", region_name=model["region"], endpoint_url=model["endpoint_url"], config=config, verify=ca_bundle,
        aws_access_key_id=model["access_key_id"], aws_secret_access_key=model["secret_access_key"])


def _code(error):
    """S3's error code in boto3's error, or in the error it wraps (a managed transfer's S3UploadFailedError)."""
    seen = 0
    while error is not None and seen < 5:
        response = getattr(error, "response", None)
        if response:
            return str(response.get("Error", {}).get("Code", ""))
        error, seen = error.__cause__ or error.__context__, seen + 1
    return ""


def missing(error):
    """Whether boto3's error says the object does not exist."""
    return _code(error) in _MISSING


def error_line(model, target, error, key="source", permission="s3:GetObject"):
    """One line for what boto3 raised on target (an s3:// URL): denied, missing, no credentials, or an
    unreachable endpoint, naming the model's variable (key: source, or mirror)."""
    variable = "vllm_model_models (%s)" % model["name"]
    code = _code(error)
    endpoint = model["endpoint_url"] or "the AWS endpoint of region %s" % (model["region"] or "(boto3's default)")
    if code in _BAD_SECRET + _BAD_KEY_ID:
        return _bad_credentials(model, variable, target, code)
    if code in _DENIED:
        return ModelStoreError("%s.%s: access to %s is denied (got %s); grant the host's role (or the keys given) "
                               "%s on the prefix" % (variable, key, target, code, permission))
    if code in _MISSING:
        return ModelStoreError("%s.%s: %s does not exist (got %s); check the prefix and the names in the checksums"
                               % (variable, key, target, code))
    if code == "NoSuchBucket":
        return ModelStoreError("%s.%s: the bucket of %s does not exist (got %s); check %s" % (
            variable, key, target, code, key))
    if type(error).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        reason = type(error).__name__
        return ModelStoreError("%s.%s: no AWS credentials for %s (got %s); attach an instance profile to the host "
                               "or set access_key_id and secret_access_key" % (variable, key, target, reason))
    if type(error).__name__ == "NoRegionError":
        return ModelStoreError("%s.region: no region for %s (got none); set region" % (variable, target))
    return ModelStoreError("%s.endpoint_url: %s cannot be reached for %s (got %s: %s); check endpoint_url, region, "
                           "proxy and CA settings" % (variable, endpoint, target, type(error).__name__,
                                                      str(error).splitlines()[0] if str(error) else ""))


def _bad_credentials(model, variable, target, code):
    """S3 could not authenticate the request: the secret does not sign as the key id says (SignatureDoesNotMatch),
    or the store knows no such key id (InvalidAccessKeyId). A grant cannot help: the message names the credential
    that is wrong (never its value), not a permission."""
    given = bool(model.get("access_key_id"))
    host = "fix the host's AWS credentials (environment, ~/.aws, instance profile)"
    if code in _BAD_SECRET:
        advice = ("set the secret_access_key issued with access_key_id" if given
                  else host + ": their secret does not match their key id")
        return ModelStoreError("%s.secret_access_key: is wrong: S3 rejected the request's signature for %s, so the "
                               "secret does not belong to the access key id (got %s); %s" % (
                                   variable, target, code, advice))
    advice = ("set an access key id that exists on %s" % (model.get("endpoint_url") or "AWS") if given
              else host + ", or set access_key_id and secret_access_key")
    return ModelStoreError("%s.access_key_id: is wrong: the S3 store knows no such access key id for %s (got %s); %s"
                           % (variable, target, code, advice))


def read_small(response, limit):
    """At most limit + 1 bytes of a get_object response's body, the body closed."""
    body = response["Body"]
    try:
        return body.read(limit + 1)
    finally:
        body.close()


def head(response):
    """(size, ETag) of a head_object answer: the ETag names the object's bytes, so a resumed file whose record holds
    another ETag starts again."""
    return int(response["ContentLength"]), str(response.get("ETag") or "")


class RangedFile:
    """One S3 object fetched into path in ranged parts (PART_BYTES each, PARTS_AT_ONCE at once), resumable: the file
    is created at its full size and each part written at its offset (os.pwrite); record (store_rules.parts_record)
    holds a first line {name, size, etag, part_bytes} and then the index of every part written, one a line. A record
    that cannot be read, does not parse or describes another object (ETag, size, part size) counts as nothing done:
    the file starts again. A file at its full size with no record is complete (a run before fetched it).

    get(first, last) makes the GET of bytes first-last (the caller's call: its client, bucket, key and error
    mapping); count is the TransferCap counter of the file. An answer of another length, place, or ETag is refused
    (TransferRefused: nothing of it is written); a body that breaks off is asked for again (PART_ATTEMPTS); a GET or a
    body that fails for good is an interruption (TransferInterrupted:
    what was written and recorded stays for the next run)."""

    def __init__(self, variable, name, path, record, size, etag, get, count):
        """variable: what the messages name (vllm_model_models (<model>).source or .mirror); name: the object's
        s3:// URL (in the record and the messages)."""
        self.variable, self.name, self.path, self.record = variable, name, path, record
        self.size, self.etag = size, etag
        self.get, self.count = get, count
        self.part_bytes = PART_BYTES
        self.parts = max(1, -(-size // self.part_bytes))
        self._lock = threading.Lock()

    def _header(self):
        return {"name": self.name, "size": self.size, "etag": self.etag, "part_bytes": self.part_bytes}

    def done(self):
        """The parts a run before wrote, from the record (validated: it is on disk, anything else counts as none)."""
        if os.path.islink(self.path) or not os.path.isfile(self.path) or os.path.getsize(self.path) != self.size:
            return set()
        if not os.path.exists(self.record):
            return set(range(self.parts))  # complete: no record says parts are missing
        try:
            if os.path.islink(self.record) or os.path.getsize(self.record) > _MAX_RECORD:
                return set()
            with open(self.record, "rb") as handle:
                lines = handle.read().decode("ascii").split("\n")
            if json.loads(lines[0]) != self._header() or lines[-1] != "":
                return set()
            done = set(int(line) for line in lines[1:-1] if line.isdigit())
        except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
            return set()
        if len(done) != len(lines) - 2 or not done <= set(range(self.parts)):
            return set()
        return done

    def fetch(self):
        """Fetch the parts not written yet (none for a complete file)."""
        done = self.done()
        if len(done) == self.parts and not os.path.exists(self.record):
            return
        os.makedirs(os.path.dirname(self.record), 0o700, exist_ok=True)
        if not done:  # start again: the record first, so a file at full size is never taken for complete
            self._write_record(json.dumps(self._header(), sort_keys=True) + "\n", os.O_TRUNC)
        descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | (0 if done else os.O_TRUNC), 0o600)
        try:
            os.ftruncate(descriptor, self.size)
            missing = sorted(set(range(self.parts)) - done)
            store_rules.in_parallel(lambda index: self._part(descriptor, index), missing, PARTS_AT_ONCE)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.unlink(self.record)  # complete

    def _length(self, index):
        return min(self.size, (index + 1) * self.part_bytes) - index * self.part_bytes

    def _write_record(self, text, flags=os.O_APPEND):
        descriptor = os.open(self.record, os.O_WRONLY | os.O_CREAT | flags, 0o600)
        try:
            os.write(descriptor, text.encode("ascii"))
            if flags != os.O_APPEND:
                os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def _part(self, descriptor, index):
        for attempt in range(1, PART_ATTEMPTS + 1):
            try:
                return self._part_once(descriptor, index)
            except _BodyBroke as error:
                if attempt == PART_ATTEMPTS:
                    raise
                self.count(-error.counted)  # the part is written again from its start: its bytes count once
                time.sleep(PART_RETRY_SECONDS * attempt)
        return None

    def _part_once(self, descriptor, index):
        first, length = index * self.part_bytes, self._length(index)
        last = first + length - 1
        if not length:  # an empty object: nothing to ask for
            return
        try:
            response = self.get(first, last)
        except store_rules.TransferRefused:
            raise
        except ModelStoreError as error:  # the caller's one line: denied, unreachable, ...
            raise store_rules.TransferInterrupted(str(error))
        body = response["Body"]
        try:
            answered = (int(response.get("ContentLength", -1)), response.get("ContentRange"),
                        str(response.get("ETag") or ""))
            asked = (length, "bytes %d-%d/%d" % (first, last, self.size), self.etag or answered[2])
            if answered != asked:
                raise store_rules.TransferRefused(
                    "%s: %s answered the range bytes=%d-%d with %s bytes at %s, ETag %s (expected %d bytes at %s, ETag "
                    "%s): not the object its HEAD announced (changed since, or a store that answers ranges wrongly); "
                    "nothing of it was written" % (
                        self.variable, self.name, first, last, answered[0], store_rules.shown(answered[1]),
                        store_rules.shown(answered[2]), length, asked[1], store_rules.shown(asked[2])))
            offset = first
            while offset <= last:
                try:
                    block = body.read(min(_BLOCK, last + 1 - offset))
                except Exception as error:  # urllib3's and botocore's read errors: the connection broke
                    raise _BodyBroke("%s: %s stopped at byte %d (got %s: %s)" % (
                        self.variable, self.name, offset, type(error).__name__, " ".join(str(error).split())[:200]),
                        offset - first)
                if not block:
                    raise _BodyBroke("%s: %s stopped at byte %d of its part bytes=%d-%d" % (
                        self.variable, self.name, offset, first, last), offset - first)
                self.count(len(block))
                view = memoryview(block)
                while view:
                    written = os.pwrite(descriptor, view, offset)
                    view, offset = view[written:], offset + written
        finally:
            body.close()
        store_rules.start_writeback(descriptor, first, length)  # on its way to disk before the file's fsync
        with self._lock:
            self._write_record("%d\n" % index)


class _BodyBroke(store_rules.TransferInterrupted):
    """A part's body that broke off after `counted` of its bytes were counted and written: asked for again
    (RangedFile._part), then an interruption like any other."""

    def __init__(self, message, counted):
        super().__init__(message)
        self.counted = counted


class Mirror:
    """The S3 prefix a fleet fetches a model from once (the model's `mirror`):

        <prefix>/<name>/<revision>/<file>      every file of a placed revision
        <prefix>/<name>/<revision>/SHA256SUMS  written last: the revision is complete once it exists
        <prefix>/<name>/refs.json              {source ref: revision}, what each ref resolved to when seeded

    One host (the controller for a controller:// source) publishes a revision from what it verified against
    the origin; the others download it, verified against those checksums. refs.json makes the fleet serve
    the revision the first seeder resolved a branch to, as one host's store record does for that host."""

    def __init__(self, model, ca_bundle=None, where="the host"):
        self.model = model
        self.bucket = model["mirror_bucket"]
        self.base = "/".join(part for part in (model["mirror_prefix"], model["name"]) if part)
        self.client = client(model, ca_bundle, where)
        self.uploaded_bytes = 0

    def key(self, *parts):
        return "/".join((self.base,) + parts)

    def url(self, *parts):
        return url(self.bucket, self.key(*parts))

    def _call(self, target, function, permission="s3:GetObject", **arguments):
        try:
            return function(Bucket=self.bucket, **arguments)
        except ModelStoreError:  # a TransferCap stopped the transfer: its own message
            raise
        except Exception as error:  # botocore's ClientError, EndpointConnectionError, NoCredentialsError, ...
            raise error_line(self.model, target, error, key="mirror", permission=permission)

    def _read(self, *parts):
        """An object's text, or None when it does not exist. Telling 'missing' from 'denied' needs
        s3:ListBucket: without it S3 answers 403 for a missing key."""
        target = self.url(*parts)
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.key(*parts))["Body"].read()
        except Exception as error:
            if missing(error):
                return None
            raise error_line(self.model, target, error, key="mirror",
                             permission="s3:GetObject on the prefix and s3:ListBucket on the bucket")
        return body.decode("utf-8", "replace")

    def refs(self):
        text = self._read(REFS)
        if text is None:
            return {}
        try:
            refs = json.loads(text)
        except ValueError as error:
            raise ModelStoreError("vllm_model_models (%s).mirror: %s is not valid JSON (%s); delete it and re-run"
                                  % (self.model["name"], self.url(REFS), error))
        if not isinstance(refs, dict):
            raise ModelStoreError("vllm_model_models (%s).mirror: %s is not a mapping of ref to revision (got %s); "
                                  "delete it and re-run" % (self.model["name"], self.url(REFS), store_rules.shown(refs)))
        # Each revision becomes a directory in every host's store: a hub commit for a hub source, else a label.
        for ref, revision in refs.items():
            store_rules.check_revision(
                revision, self.model["kind"], "vllm_model_models (%s).mirror: %s entry %s" % (
                    self.model["name"], self.url(REFS), store_rules.shown(ref)),
                "only a seeder writes there and it writes revisions only: check who may write the mirror, delete %s "
                "and re-run" % self.url(REFS))
        return refs

    def sums(self, revision):
        """{file: sha256} of a complete revision in the mirror, or None when it is not there (yet)."""
        text = self._read(revision, SUMS)
        return None if text is None else store_rules.parse_sha256sums(text, self.url(revision, SUMS))

    def head(self, revision, name):
        """(size, ETag) of a file of revision."""
        return head(self._call(self.url(revision, name), self.client.head_object, Key=self.key(revision, name)))

    def read_small(self, revision, name, limit):
        """The first limit + 1 bytes of a small file of revision (a ranged GET): more is refused by the caller."""
        return read_small(self._call(self.url(revision, name), self.client.get_object, Key=self.key(revision, name),
                                     Range="bytes=0-%d" % limit), limit)

    def download(self, revision, name, target, record, announced, count):
        """A file of revision into target in ranged parts (RangedFile: record keeps the parts written, so an
        interrupted transfer goes on from them); announced: its (size, ETag) from head; count (TransferCap.counter)
        sees every block and stops a transfer that sends more than announced or allowed."""
        url, key = self.url(revision, name), self.key(revision, name)
        RangedFile("vllm_model_models (%s).mirror" % self.model["name"], url, target, record, announced[0], announced[1],
                   lambda first, last: self._call(url, self.client.get_object, Key=key,
                                                  Range="bytes=%d-%d" % (first, last)),
                   count).fetch()

    def publish(self, root, revision, files, ref):
        """Upload every file of a verified revision (root/<file>), then its SHA256SUMS, then the ref it
        resolved from; returns the bytes uploaded (boto3's own count of what it sent)."""
        def count(sent):
            self.uploaded_bytes += sent

        permission = "s3:PutObject"
        for name in sorted(files):
            self._call(self.url(revision, name), self.client.upload_file, permission=permission,
                       Filename="%s/%s" % (root, name), Key=self.key(revision, name), Callback=count)
        sums = "".join("%s  %s\n" % (files[name]["sha256"], name) for name in sorted(files)).encode()
        self._call(self.url(revision, SUMS), self.client.put_object, permission=permission,
                   Key=self.key(revision, SUMS), Body=sums)
        self.remember(ref, revision)
        return self.uploaded_bytes

    def remember(self, ref, revision):
        refs = self.refs()
        if refs.get(ref) != revision:
            refs[ref] = revision
            self._call(self.url(REFS), self.client.put_object, permission="s3:PutObject", Key=self.key(REFS),
                       Body=json.dumps(refs, indent=1, sort_keys=True).encode())

    def check(self, revision, sums, verified):
        """Refuse a mirror whose checksums disagree with what this host (or the controller) verified."""
        expected = dict((name, entry["sha256"]) for name, entry in verified.items())
        if sums != expected:
            differ = sorted(name for name in set(sums) | set(expected) if sums.get(name) != expected.get(name))
            raise ModelStoreError(
                "vllm_model_models (%s).mirror: %s disagrees with the files verified from the source at %s (got "
                "differences in %s); delete %s/ from the mirror and re-run to publish it again"
                % (self.model["name"], self.url(revision, SUMS), revision, ", ".join(differ[:5]), self.url(revision)))
