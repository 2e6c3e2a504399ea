# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_model role's rules and its model store.

Input rules (check_vllm_model_variables, normalize_model) are pure functions, so the preflight play,
the role's own first task and the unit tests share them. The store keeps every model as
<store>/<name>/<revision>, a relative symlink <store>/<name>/current, and one state file
<store>/<name>/.state.json that records what was placed (each file's sha256 and size), which commit a
branch or tag resolved to, and what was current before. A re-run decides from that record alone,
before any network client is created.
"""

from __future__ import annotations

import datetime
import fnmatch
import hashlib
import json
import os
import re
import shutil
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from urllib.parse import unquote, urlsplit

SOURCE_KINDS = {"hf": "hf", "file": "host", "controller": "controller", "s3": "s3", "http": "http", "https": "http"}
# An http(s) source whose URL path ends in one of these is an archive of the model directory (kind "archive"),
# not the directory of a file list.
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".zip")
MODEL_KEYS = ("name", "source", "revision", "token", "include", "exclude", "endpoint", "sha256", "sha256sums",
              "region", "endpoint_url", "access_key_id", "secret_access_key", "mirror", "headers")
HUB_ONLY_KEYS = ("token", "include", "exclude", "endpoint")
# S3 credentials default to boto3's own chain (the instance profile on EC2); keys given here reach boto3
# as module arguments (no_log), never argv or another process's environment.
S3_ONLY_KEYS = ("region", "endpoint_url", "access_key_id", "secret_access_key")
# Sources a fleet can fetch once: one host (the controller for controller://) pulls from the origin and
# publishes to the S3 mirror, the other hosts read the mirror. An s3:// source is already a bucket the
# fleet reads, a file:// one is already on the host.
MIRRORED_KINDS = ("hf", "http", "archive", "controller")
SECRET_KEYS = ("token", "secret_access_key", "headers")
# HTTP headers an http(s) origin takes from the operator (an Authorization or API key header), sent to the source's
# own origin only and never along a redirect; these the module sets itself (Range, resumes) or the HTTP client owns,
# and Accept-Encoding: a compressed answer is not the file's bytes, which are hashed and resumed as they arrive.
OWN_HEADERS = ("range", "host", "content-length", "transfer-encoding", "connection", "accept-encoding")
# A header name is an HTTP token (RFC 9110, 5.1 and 5.6.2: tchar); a value is printable ASCII, spaces and tabs.
_TCHAR = r"[!#$%&'*+.^_`|~0-9A-Za-z-]"
_HEADER_NAME = re.compile(r"^%s{1,128}$" % _TCHAR)
_HEADER_VALUE = re.compile(r"^[\x20-\x7e\t]{1,8192}$")
# File name patterns of weights: what the tuning has to fit in memory (the rest is config and tokenizer).
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf", "*.ckpt")
STATE_FILE = ".state.json"
STAGING_PREFIX = ".staging-"
CURRENT = "current"
# The revision labels the store derives itself (manifest_revision): with the commits, the only names of revision
# directories it removes without a record of them.
_DERIVED = re.compile(r"^sha256-[0-9a-f]{16}$")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
_HUB_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SUMS_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")
# S3 bucket naming rules (general purpose buckets): 3-63 lower-case letters, digits, '.', '-'.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-[0-9]+$")
_ACCESS_KEY_ID = re.compile(r"^[A-Za-z0-9]{16,128}$")
# A group name as useradd/groupadd accept it (Debian's and RHEL's default NAME_REGEX, and systemd's).
_GROUP = re.compile(r"^[a-z_][a-z0-9_-]{0,30}\$?$")
# A release version pip pins with '==' (PEP 440's public versions; no local part, no spaces, no options).
_PIN = re.compile(r"^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$")
# Directories a store or venv must never be (the role owns and prunes what is under its own).
SYSTEM_DIRECTORIES = ("/", "/usr", "/var", "/opt", "/etc", "/home", "/var/lib", "/bin", "/sbin", "/lib", "/boot",
                      "/root", "/tmp", "/usr/local")
# More parallel hub downloads than this only opens more connections to one hub.
MAX_WORKERS = 32
# The client versions the role ships a hash-pinned lock for (roles/vllm_model/files/tools/<client>-<version>.txt,
# written by `make tools-lock`): the tools venv installs nothing else. A unit test compares this with the files.
TOOL_LOCKS = {"huggingface_hub": ("2.4.0",), "boto3": ("1.44.5",)}
TOOL_VERSION_VARIABLES = {"huggingface_hub": "vllm_model_huggingface_hub_version", "boto3": "vllm_model_boto3_version"}
# A lock's requirement: name==version, an optional environment marker; then one or more sha256 of its files.
_LOCK_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][A-Za-z0-9.+!-]*( ; [^\\]+)?$")
_LOCK_HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")


class ModelInputError(ValueError):
    """Bad input for the vllm_model role; the message is one line naming the variable."""


class ModelStoreError(Exception):
    """A model that cannot be placed (origin, checksum, disk); the message says what to do."""


def redact_url(url):
    """A URL as it may be printed or stored: without user:password@, and with a query string or fragment shown as
    '?(redacted)' (a presigned URL's signature is a credential). Anything that is not a URL is returned as it is."""
    if not isinstance(url, str) or "://" not in url:
        return url
    scheme, netloc, path, query, fragment = urlsplit(url)
    text = "%s://%s%s" % (scheme, netloc.rpartition("@")[2], path)
    return text + "?(redacted)" if query or fragment else text


def has_userinfo(url):
    """Whether a URL carries user:password@ (or user@) before its host."""
    return isinstance(url, str) and "://" in url and "@" in urlsplit(url).netloc


def shown(value):
    """A value for an error message: one line, control characters escaped, long values cut, a URL redacted
    (redact_url)."""
    if value == "":
        return "''"  # "(got )" would read as if nothing were shown
    text = json.dumps(value) if not isinstance(value, str) else value
    text = _CONTROL.sub(lambda match: "\\x%02x" % ord(match.group()), text)
    text = redact_url(text) if isinstance(value, str) else text
    return text if len(text) <= 120 else text[:117] + "..."


def _fail(variable, problem, value, advice):
    raise ModelInputError("%s: %s (got %s); %s" % (variable, problem, shown(value), advice))


def source_kind(source):
    """The kind of a source URI (hf, host, controller, s3, http, archive), or None for an unknown scheme."""
    scheme, separator, _rest = source.partition("://")
    kind = SOURCE_KINDS.get(scheme) if separator else None
    return "archive" if kind == "http" and archive_name(source) else kind


def archive_name(source):
    """The file name of the archive an http(s) URL names (the last part of its path), or None for a directory."""
    name = unquote(urlsplit(source).path.rpartition("/")[2])
    return name if any(name.lower().endswith(suffix) and len(name) > len(suffix) for suffix in ARCHIVE_SUFFIXES) \
        else None


def _check_patterns(variable, value):
    if not isinstance(value, list) or not all(isinstance(item, str) and item and not _CONTROL.search(item)
                                              for item in value):
        _fail(variable, "must be a list of non-empty glob patterns", value, "write patterns such as '*.safetensors'")


def _check_manifest(variable, value):
    if not isinstance(value, dict) or not value:
        _fail(variable, "must be a non-empty mapping of file name to sha256", value,
              "list each file relative to the model directory with its 64-hex sha256")
    for name, digest in value.items():
        check_relative_path("%s[%s]" % (variable, shown(name)), name)
        if not isinstance(digest, str) or not _SHA256.match(digest.lower()):
            _fail("%s[%s]" % (variable, name), "is not a sha256 (64 hexadecimal digits)", digest,
                  "copy the digest from sha256sum's output")


def is_file_name(name):
    """A file name inside a model directory: relative and normalised (no empty, '.' or '..' part, no leading '/'),
    no control characters, at most 1024 characters with parts of at most 255."""
    if not isinstance(name, str) or not name or len(name) > 1024 or _CONTROL.search(name):
        return False
    return all(part not in ("", ".", "..") and len(part) <= 255 for part in name.split("/"))


def check_relative_path(variable, name):
    """A file name inside a model directory (is_file_name), or a one-line refusal naming variable."""
    if not is_file_name(name):
        _fail(variable, "must be a relative file name inside the model directory", name,
              "name files like config.json or subdir/model.safetensors")


def is_label(value):
    """A revision label of the store: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit, no '..'
    (so never a path: no '/', no leading '.')."""
    return (isinstance(value, str) and bool(_LABEL.match(value)) and ".." not in value
            and value != CURRENT)


def is_revision(value, kind=None):
    """A revision that may name a directory of the store: a hub commit (40 lower-case hex digits) for kind hf, a
    label (is_label) for the other kinds, either when the kind is not known."""
    if kind == "hf":
        return is_commit(value)
    return is_label(value)


def check_revision(value, kind, origin, advice):
    """A revision that arrived from outside (a hub's answer, a mirror's refs.json, the seeder's result, the state
    file), refused with a ModelStoreError naming origin unless is_revision: it becomes a path in the store."""
    if not is_revision(value, kind):
        raise ModelStoreError("%s: not a %s (got %s); %s" % (
            origin, "hub commit (40 lower-case hex digits)" if kind == "hf"
            else "revision label (letters, digits, '.', '_', '-'; no '/', no '..', no leading '.')", shown(value),
            advice))
    return value


def check_file_names(names, origin, advice):
    """File names that arrived from outside (a listing, a manifest, the state file): each must be is_file_name."""
    for name in names:
        if not is_file_name(name):
            raise ModelStoreError("%s: names a file outside the model directory or with control characters (got %s); "
                                  "%s" % (origin, shown(name), advice))


def check_model_name(name, variable):
    """A model's name: its directory in the store."""
    if not isinstance(name, str) or not _NAME.match(name):
        _fail(variable, "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
              name, "pick a directory-safe name such as llama-3.1-8b")
    return name


def normalize_model(model, index):
    """One entry of vllm_model_models, checked, with its source kind and location split out."""
    variable = "vllm_model_models[%d]" % index
    if not isinstance(model, dict):
        _fail(variable, "must be a mapping with name and source", model, "write {name: ..., source: hf://org/name}")
    unknown = sorted(set(model) - set(MODEL_KEYS))
    if unknown:
        # Only the keys are shown: the entry may hold a token.
        _fail(variable, "has unknown keys", unknown,
              "use only %s; a model has exactly one source, its source URI" % ", ".join(MODEL_KEYS))
    name = check_model_name(model.get("name"), variable + ".name")
    variable = "vllm_model_models[%d] (%s)" % (index, name)
    source = model.get("source")
    if isinstance(source, list):
        _fail(variable + ".source", "names %d sources, a model has exactly one" % len(source), source,
              "declare one model per source")
    if not isinstance(source, str) or not source or _CONTROL.search(source):
        _fail(variable + ".source", "must be one source URI", source,
              "write hf://org/name, file:///path/on/host or controller:///path/on/controller")
    kind = source_kind(source)
    if kind is None:
        _fail(variable + ".source", "has an unknown source scheme", source,
              "use hf://, file:// (a directory on the host), controller:// (a directory on the controller), "
              "s3:// or https://")
    location = source.partition("://")[2]
    # Credentials in a URL end up in logs, the state file and error messages: refused, whichever key holds it.
    for key in ("source", "endpoint", "endpoint_url", "sha256sums", "mirror"):
        if has_userinfo(model.get(key)):
            _fail("%s.%s" % (variable, key), "carries credentials in the URL (user:password@)", model[key],
                  "remove them: the hub takes token, S3 takes access_key_id and secret_access_key, an HTTP origin "
                  "takes headers (such as Authorization) or a presigned URL, whose query is never printed or stored")
    normalized = {"name": name, "source": source, "kind": kind, "location": location}
    headers = model.get("headers")
    if headers not in (None, {}):
        if kind not in ("http", "archive"):
            _fail(variable + ".headers", "only applies to http:// and https:// sources", "(hidden)",
                  "remove it from this %s source" % source.partition("://")[0])
        normalized["headers"] = _check_headers(variable + ".headers", headers)

    revision = model.get("revision")
    if kind == "hf":
        if not _REPO_ID.match(location):
            _fail(variable + ".source", "is not a hub repository id", source, "write hf://org/name")
        if revision is None or revision == "":
            _fail(variable + ".revision", "is required for a hub model", revision,
                  "pin a commit (40 hex digits), or a tag or branch that is resolved once and recorded")
        if not isinstance(revision, str) or not _HUB_REVISION.match(revision) or ".." in revision:
            _fail(variable + ".revision", "is not a commit, tag or branch name", revision,
                  "write 40 hex digits or a ref name such as main or v1.0")
        token = model.get("token")
        if token is not None and (not isinstance(token, str) or _CONTROL.search(token) or not token.strip()):
            # The token's value never reaches a message.
            raise ModelInputError("%s.token: must be a non-empty string on one line (got a %s); pass the hub token "
                                  "from a vault" % (variable, type(token).__name__))
        for key in ("include", "exclude"):
            if model.get(key) is not None:
                _check_patterns("%s.%s" % (variable, key), model[key])
        endpoint = model.get("endpoint")
        if endpoint is not None and (not isinstance(endpoint, str)
                                     or not re.match(r"^https?://[^\s/]+(/\S*)?$", endpoint)):
            _fail(variable + ".endpoint", "must be an http:// or https:// URL", endpoint,
                  "name the hub mirror's base URL, such as https://hf-mirror.example.com")
        for key in ("sha256", "sha256sums"):
            if model.get(key) is not None:
                _fail("%s.%s" % (variable, key), "does not apply to a hub model", "(set)",
                      "leave it out: the hub publishes each file's checksum")
        normalized.update(revision=revision, token=token or None, include=model.get("include"),
                          exclude=model.get("exclude"), endpoint=endpoint or None)
        return _with_mirror(variable, model, kind, normalized)

    for key in HUB_ONLY_KEYS:
        if model.get(key) is not None:
            shown = "(hidden)" if key == "token" else model[key]
            _fail("%s.%s" % (variable, key), "only applies to hf:// sources", shown,
                  "remove it from this %s source" % kind)
    if kind == "s3":
        _check_s3(variable, model, location, source)
    if kind == "http":
        if not re.match(r"^[^\s/]+/\S*$", location) or "/../" in location + "/":
            _fail(variable + ".source", "must be the URL of the directory that holds the files", source,
                  "write https://host/path/ (the file names come from sha256 or sha256sums)")
    elif kind == "archive":
        if not re.match(r"^[^\s/]+/\S*$", location) or "/../" in location:
            _fail(variable + ".source", "must be the URL of the archive", source,
                  "write https://host/path/model.tar.gz (%s)" % ", ".join(ARCHIVE_SUFFIXES))
    elif kind != "s3" and (not location.startswith("/") or _CONTROL.search(location) or "/../" in location + "/"):
        _fail(variable + ".source", "must name an absolute directory", source,
              "write %s:///absolute/path" % source.partition("://")[0])
    if revision is not None and revision != "" and not is_label(revision):
        _fail(variable + ".revision", "must be a label of letters, digits, '.', '_' or '-' (no '..')", revision,
              "leave it empty to name the revision after the files' checksums")
    if model.get("sha256") is not None:
        _check_manifest(variable + ".sha256", model["sha256"])
        archive = archive_name(source) if kind == "archive" else None
        if archive and sorted(model["sha256"]) != [archive]:
            # The files inside are verified through the archive's own checksum.
            _fail(variable + ".sha256", "must name the archive %s, and only it" % archive, sorted(model["sha256"]),
                  "write sha256: {%s: <its sha256>}" % archive)
    sums = model.get("sha256sums")
    if sums is not None:
        if model.get("sha256") is not None:
            _fail(variable + ".sha256sums", "is set together with sha256", sums, "give the checksums one way")
        if not isinstance(sums, str) or not sums or _CONTROL.search(sums) or sums.strip() != sums:
            _fail(variable + ".sha256sums", "must be a file name", sums,
                  "name a SHA256SUMS file (relative to the model directory, or absolute)")
    if kind in ("host", "http", "archive", "s3") and model.get("sha256") is None and sums is None:
        _fail(variable, "a %s source needs checksums to verify against" % source.partition("://")[0], source,
              "set sha256 (file: digest) or sha256sums (a SHA256SUMS file)")
    normalized.update(revision=revision or None, sha256=model.get("sha256"), sha256sums=sums)
    if kind == "archive":
        normalized["archive"] = archive_name(source)
    if kind == "s3":
        if model.get("mirror") not in (None, ""):
            _fail(variable + ".mirror", "does not apply to an s3 source", model["mirror"],
                  "remove it: the hosts read the bucket already")
        normalized.update(_s3_settings(model, location), mirror=None, clients=["boto3"])
        return normalized
    return _with_mirror(variable, model, kind, normalized)


def _check_headers(variable, headers):
    """The operator's HTTP headers for an http(s) origin ({name: value}); a refusal names the header, never its
    value (the values are credentials)."""
    if not isinstance(headers, dict):
        _fail(variable, "must be a mapping of HTTP header name to value", "a %s" % type(headers).__name__,
              "write headers: {Authorization: 'Bearer ...'} with the value from a vault")
    seen = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            # Shown up to its first character a token may not hold: 'Authorization: Bearer <token>' written as a
            # name shows no token.
            prefix = re.match(r"^%s{0,64}" % _TCHAR, name).group() if isinstance(name, str) else ""
            _fail(variable, "has a header name that is not an HTTP token", "%s... (cut)" % prefix if isinstance(
                name, str) else "a %s" % type(name).__name__,
                "name headers with letters, digits and !#$%&'*+-.^_`|~ only, such as X-Api-Key")
        if name.lower() in OWN_HEADERS:
            _fail(variable, "sets %s, which the module sets or the HTTP client owns" % name, name,
                  "remove it (headers may not set %s)" % ", ".join(OWN_HEADERS))
        if name.lower() in seen:
            _fail(variable, "names the header %s twice (HTTP header names ignore case)" % name, name,
                  "keep one of them")
        seen.add(name.lower())
        if not isinstance(value, str) or not _HEADER_VALUE.match(value) or not value.strip():
            # The value never reaches a message: only what kind of value it is.
            _fail(variable, "has a value for %s that is not one non-empty line of printable ASCII" % name,
                  "a %s%s" % (type(value).__name__, " with control characters or non-ASCII characters"
                              if isinstance(value, str) and value.strip() else ""),
                  "pass the header's value from a vault, without line breaks")
    return dict(headers)


def _s3_settings(model, location):
    bucket, _slash, prefix = location.partition("/")
    return {"bucket": bucket, "prefix": prefix.strip("/"), "region": model.get("region") or None,
            "endpoint_url": model.get("endpoint_url") or None, "access_key_id": model.get("access_key_id") or None,
            "secret_access_key": model.get("secret_access_key") or None}


def _with_mirror(variable, model, kind, normalized):
    """normalized with its mirror (the S3 keys then configure the mirror) and the Python clients the host
    needs for it (clients: the tools venv's packages; none means the host's own Python places it)."""
    mirror = model.get("mirror")
    clients = ["huggingface_hub"] if kind == "hf" else []
    if mirror is None or mirror == "":
        _refuse_s3_keys(variable, model, kind)
        normalized.update(mirror=None, clients=clients)
        return normalized
    if kind not in MIRRORED_KINDS:
        _fail(variable + ".mirror", "does not apply to a %s source" % model["source"].partition("://")[0], mirror,
              "remove it: the model is on the host")
    if not isinstance(mirror, str) or not mirror.startswith("s3://"):
        _fail(variable + ".mirror", "must be an S3 prefix the fleet reads", mirror,
              "write s3://bucket/prefix (one host fetches from the source and publishes there)")
    location = mirror[len("s3://"):]
    _check_s3(variable, model, location, mirror, key="mirror")
    settings = _s3_settings(model, location)
    normalized.update(mirror=mirror.rstrip("/"), mirror_bucket=settings.pop("bucket"),
                      mirror_prefix=settings.pop("prefix"), clients=clients + ["boto3"], **settings)
    return normalized


def _refuse_s3_keys(variable, model, kind):
    for key in S3_ONLY_KEYS:
        if model.get(key) is not None:
            shown = "(hidden)" if key in SECRET_KEYS else model[key]
            _fail("%s.%s" % (variable, key), "only applies to s3:// sources and mirrors", shown,
                  "remove it from this %s source, or set mirror" % kind)


def _check_s3(variable, model, location, source, key="source"):
    bucket, _slash, prefix = location.partition("/")
    if not _BUCKET.match(bucket) or ".." in bucket:
        _fail("%s.%s" % (variable, key), "does not name an S3 bucket (3-63 lower-case letters, digits, '.' or '-')",
              source, "write s3://bucket/prefix")
    if _CONTROL.search(prefix) or "//" in prefix or any(part in (".", "..") for part in prefix.split("/")):
        _fail("%s.%s" % (variable, key), "has a prefix with empty, '.' or '..' parts", source,
              "write s3://bucket/path/to/model")
    region = model.get("region")
    if region is not None and (not isinstance(region, str) or not _REGION.match(region)):
        _fail(variable + ".region", "is not an AWS region name", region, "write a region such as eu-west-1")
    endpoint = model.get("endpoint_url")
    if endpoint is not None and (not isinstance(endpoint, str)
                                 or not re.match(r"^https?://[^\s/]+(/\S*)?$", endpoint)):
        _fail(variable + ".endpoint_url", "must be an http:// or https:// URL", endpoint,
              "name the S3-compatible store's endpoint, such as https://minio.example.com:9000")
    key_id, secret = model.get("access_key_id"), model.get("secret_access_key")
    if (key_id is None) != (secret is None):
        _fail(variable + (".secret_access_key" if secret is None else ".access_key_id"),
              "is missing: access_key_id and secret_access_key go together", "only one set",
              "set both, or neither to use the host's instance profile")
    if key_id is not None and (not isinstance(key_id, str) or not _ACCESS_KEY_ID.match(key_id)):
        _fail(variable + ".access_key_id", "is not an access key id (16-128 letters and digits)", key_id,
              "copy the key id from the IAM user's access key")
    if secret is not None and (not isinstance(secret, str) or _CONTROL.search(secret) or not secret.strip()):
        # The secret's value never reaches a message.
        raise ModelInputError("%s.secret_access_key: must be a non-empty string on one line (got a %s); pass it "
                              "from a vault" % (variable, type(secret).__name__))


def check_vllm_model_variables(variables):
    """Raise ModelInputError (one line: variable, problem, value, what to do) for bad vllm_model input."""
    normalized_models(variables)


def normalized_models(variables):
    """The role's variables checked, and its models normalized (kind and location split out)."""
    models = variables.get("vllm_model_models", [])
    if not isinstance(models, list):
        _fail("vllm_model_models", "must be a list of models", models, "write a list of {name, source}")
    store = variables.get("vllm_model_store", "/var/lib/vllm-models")
    if (not isinstance(store, str) or not store.startswith("/") or _CONTROL.search(store)
            or os.path.normpath(store) in SYSTEM_DIRECTORIES):
        _fail("vllm_model_store", "must be an absolute, dedicated directory", store, "use a path like /var/lib/vllm-models")
    keep = variables.get("vllm_model_keep", 2)
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        _fail("vllm_model_keep", "must be an integer of at least 1", keep,
              "keep 1 (the current revision only) or more revisions per model")
    reserve = variables.get("vllm_model_min_free_disk_gib", 1)
    if isinstance(reserve, bool) or not isinstance(reserve, (int, float)) or reserve < 0:
        _fail("vllm_model_min_free_disk_gib", "must be a number of GiB >= 0", reserve,
              "set the free space to leave on the store's file system")
    workers = variables.get("vllm_model_download_workers", 4)
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        _fail("vllm_model_download_workers", "must be an integer from 1 to %d" % MAX_WORKERS, workers,
              "set the number of files of a model downloaded at once, such as 4")
    group = variables.get("vllm_model_group", "")
    if group not in ("", None) and (not isinstance(group, str) or not _GROUP.match(group)):
        _fail("vllm_model_group", "is not a group name", group,
              "name a system group such as vllm-serve, or leave it empty for vllm_serve_group")
    venv = variables.get("vllm_model_tools_venv", "/opt/vllm/model-tools")
    if (not isinstance(venv, str) or not venv.startswith("/") or _CONTROL.search(venv) or " " in venv
            or ".." in venv.split("/") or os.path.normpath(venv) in SYSTEM_DIRECTORIES):
        _fail("vllm_model_tools_venv", "must be an absolute, dedicated directory without spaces or '..'", venv,
              "use a path like /opt/vllm/model-tools")
    for client, key in TOOL_VERSION_VARIABLES.items():
        version = variables.get(key, TOOL_LOCKS[client][0])
        if not isinstance(version, str) or not _PIN.match(version):
            _fail(key, "is not a release version to pin", version,
                  "write a version as PyPI lists it, such as %s" % TOOL_LOCKS[client][0])
        if version not in TOOL_LOCKS[client]:
            _fail(key, "has no hash-pinned lock in the role (locks for %s: %s)" % (client, ", ".join(TOOL_LOCKS[client])),
                  version, "set one of those, or add a lock for it with `make tools-lock` (roles/vllm_model/README.md, "
                  "\"Tools venv\")")
    bundle = variables.get("vllm_model_ca_bundle") or ""
    if bundle and (not isinstance(bundle, str) or not os.path.isfile(os.path.expanduser(bundle))):
        _fail("vllm_model_ca_bundle", "names no file on the controller", bundle,
              "give the path of a PEM bundle on the machine running ansible-playbook, or leave it empty")
    if bundle and not _is_pem_bundle(os.path.expanduser(bundle)):
        _fail("vllm_model_ca_bundle", "is not a PEM bundle of certificates (the clients read no other form)", bundle,
              "convert it (openssl x509 -inform der -in <file> -out <file>.pem) and name the PEM file")
    writer = variables.get("vllm_model_mirror_writer") or ""
    hosts = variables.get("inventory_hosts")
    if not isinstance(writer, str) or (writer and hosts is not None and writer not in hosts):
        _fail("vllm_model_mirror_writer", "is not a host of the inventory", writer,
              "name the inventory host that may write the fleet mirrors (it seeds them), or leave it empty for the "
              "play's first host")
    result, seen = [], {}
    for index, model in enumerate(models):
        entry = normalize_model(model, index)
        if entry["name"] in seen:
            _fail("vllm_model_models[%d].name" % index, "repeats the name of entry %d" % seen[entry["name"]],
                  entry["name"], "give every model its own name")
        seen[entry["name"]] = index
        result.append(entry)
    return result


def _is_pem_bundle(path, limit=16 << 20):
    """Whether the file holds at least one PEM certificate (a DER file or another file does not)."""
    try:
        with open(path, "rb") as handle:
            return b"-----BEGIN CERTIFICATE-----" in handle.read(limit)
    except OSError:
        return False


def tool_lock_files(pins):
    """The lock file names (under the role's files/tools/) of {client: version}, in the order given."""
    return ["%s-%s.txt" % (client, version) for client, version in pins.items()]


def lock_requirements(text):
    """The entries of a hash-pinned lock, in order: {requirement ('name==version[ ; marker]'), name, version,
    hashes}; ValueError naming the line when an entry is not `name==version` or carries no sha256."""
    entries, logical = [], []
    for line in text.splitlines() + [""]:
        stripped = line.strip()
        if logical or (stripped and not stripped.startswith("#")):
            logical.append(stripped.rstrip("\\").strip())
            if stripped.endswith("\\"):
                continue
            words = " ".join(logical).split(" --hash=")
            logical = []
            requirement, hashes = words[0].strip(), ["--hash=" + word.strip() for word in words[1:]]
            if not _LOCK_REQUIREMENT.match(requirement) or not hashes or not all(_LOCK_HASH.match(h) for h in hashes):
                raise ValueError("not a hash-pinned requirement (name==version, then --hash=sha256:...): %s"
                                 % shown(" ".join([requirement] + hashes)))
            name, version = requirement.split(" ; ")[0].split("==")
            entries.append({"requirement": requirement, "name": name, "version": version,
                            "hashes": [h.split(":", 1)[1] for h in hashes]})
    return entries


def is_sha256(value):
    return isinstance(value, str) and bool(_SHA256.match(value.lower()))


def is_commit(revision):
    return isinstance(revision, str) and bool(_COMMIT.match(revision))


def select_files(names, include=None, exclude=None):
    """The file names a model takes: matching any include pattern (all when none) and no exclude pattern."""
    chosen = []
    for name in names:
        if include and not any(fnmatch.fnmatch(name, pattern) for pattern in include):
            continue
        if exclude and any(fnmatch.fnmatch(name, pattern) for pattern in exclude):
            continue
        chosen.append(name)
    return sorted(chosen)


def weight_bytes(sizes):
    """Bytes of the weight files among {name: size}: what the tuning has to fit in memory."""
    return sum(size for name, size in sizes.items()
               if any(fnmatch.fnmatch(os.path.basename(name), pattern) for pattern in WEIGHT_PATTERNS))


def parse_sha256sums(text, origin):
    """{file: sha256} from sha256sum's output format ('<hex>  name' or '<hex> *name')."""
    manifest = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = _SUMS_LINE.match(line.rstrip("\r"))
        if not match:
            raise ModelStoreError("%s line %d is not '<sha256>  <file>' (got %s); write it with sha256sum"
                                  % (origin, number, shown(line)))
        name = match.group(2)
        name = name[2:] if name.startswith("./") else name
        check_relative_path("%s line %d" % (origin, number), name)
        manifest[name] = match.group(1).lower()
    if not manifest:
        raise ModelStoreError("%s lists no files; write it with sha256sum" % origin)
    return manifest


def manifest_revision(manifest):
    """A revision label for a source without one: the first 16 hex digits of its manifest's digest."""
    text = "".join("%s  %s\n" % (manifest[name]["sha256"], name) for name in sorted(manifest))
    return "sha256-" + hashlib.sha256(text.encode()).hexdigest()[:16]


# Writeback while a file arrives: every WRITEBACK_BYTES written, the kernel is asked to start writing them to disk
# (sync_file_range with SYNC_FILE_RANGE_WRITE, which does not wait, as git's batch fsync mode does), so the fdatasync
# at the file's end finds most of it on disk instead of writing it all then, while the network sat idle.
WRITEBACK_BYTES = 32 << 20
_SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range():
    try:
        import ctypes

        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):  # not Linux, or no such call
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
    function.restype = ctypes.c_int
    return function


_SYNC_RANGE = _sync_file_range()


def start_writeback(descriptor, offset, length):
    """Start writing bytes offset..offset+length of an open file to disk, without waiting; a no-op where the call is
    missing or refused (the final fdatasync still makes them durable)."""
    if _SYNC_RANGE is not None and length > 0:
        _SYNC_RANGE(descriptor, offset, length, _SYNC_FILE_RANGE_WRITE)


def file_sha256(path, chunk=1 << 20):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def git_blob_sha1(path, chunk=1 << 20):
    """The git object id of a file: what the hub publishes for files not kept in LFS."""
    digest = hashlib.sha1(b"blob %d\0" % os.path.getsize(path), usedforsecurity=False)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_bytes(name, data, want):
    """A small file read into memory, checked like verify_files checks one on disk: against want's size, sha256 or
    git_sha1 (the git object id the hub publishes for files outside LFS), each where given."""
    if want.get("size") and len(data) != want["size"]:
        raise ModelStoreError("%s is %d bytes, the source announced %d" % (name, len(data), want["size"]))
    if want.get("sha256") and hashlib.sha256(data).hexdigest() != want["sha256"].lower():
        raise ModelStoreError("%s does not match the sha256 %s the source pins" % (name, want["sha256"].lower()))
    blob = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    blob.update(data)
    if want.get("git_sha1") and blob.hexdigest() != want["git_sha1"]:
        raise ModelStoreError("%s does not match the git object id %s the hub published" % (name, want["git_sha1"]))


def list_files(root):
    """Every regular file under root, relative, sorted; symlinks and special files are refused."""
    found = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories.sort()
        for name in files + [entry for entry in subdirectories if os.path.islink(os.path.join(directory, entry))]:
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root)
            if os.path.islink(path) or not os.path.isfile(path):
                raise ModelStoreError("%s is a symlink or special file; a model directory holds regular files only"
                                      % path)
            found.append(relative)
    return sorted(found)


def verify_files(root, expected, hashed=None):
    """Check every file under root against expected {name: {"sha256" or "git_sha1", "size"}}; return the
    manifest {name: {"sha256", "size"}}. Missing, extra, resized or altered files are refused. hashed: {name:
    sha256} of files this process wrote and hashed itself (a download that hashed its stream, or the file right after
    writing it): those are not read a second time."""
    present = set(list_files(root))
    missing = sorted(set(expected) - present)
    extra = sorted(present - set(expected))
    if missing or extra:
        raise ModelStoreError("files differ from the checksums: missing %s, unexpected %s"
                              % (", ".join(missing) or "none", ", ".join(extra) or "none"))
    manifest = {}
    for name in sorted(expected):
        path = os.path.join(root, name)
        want = expected[name]
        size = os.path.getsize(path)
        if want.get("size") is not None and size != want["size"]:
            raise ModelStoreError("%s is %d bytes, the source announced %d: a truncated or corrupted download"
                                  % (name, size, want["size"]))
        sha256 = (hashed or {}).get(name) or file_sha256(path)
        if want.get("sha256") and sha256 != want["sha256"].lower():
            raise ModelStoreError("%s has sha256 %s, expected %s: a corrupted download or a wrong checksum"
                                  % (name, sha256, want["sha256"].lower()))
        if want.get("git_sha1") and git_blob_sha1(path) != want["git_sha1"]:
            raise ModelStoreError("%s does not match the git object id %s the hub published: a corrupted download"
                                  % (name, want["git_sha1"]))
        manifest[name] = {"sha256": sha256, "size": size}
    return manifest


# What vLLM's loader reads of a model directory besides the weights: its config, and (for a sharded checkpoint) the
# index whose weight_map names every shard. An index is metadata of a few MB at most.
CONFIG_FILE = "config.json"
INDEX_SUFFIXES = (".safetensors.index.json", ".bin.index.json")
MAX_INDEX_BYTES = 64 * 1024 * 1024


def _index_shards(root, index_name, origin):
    """The shard names an index's weight_map holds, each checked as a file name (the index came with the files)."""
    path = os.path.join(root, index_name)
    if os.path.getsize(path) > MAX_INDEX_BYTES:
        raise ModelStoreError("%s: %s is larger than %d MiB, not a checkpoint index; the source serves something "
                              "else under its name" % (origin, index_name, MAX_INDEX_BYTES >> 20))
    try:
        with open(path, encoding="utf-8") as handle:
            index = json.load(handle)
    except (UnicodeDecodeError, ValueError) as error:
        raise ModelStoreError("%s: %s is not valid JSON (%s); the source serves a broken index" % (
            origin, index_name, shown(str(error))))
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(shard, str) for shard in weight_map.values()):
        raise ModelStoreError("%s: %s has no weight_map of tensor name to shard file (got %s); the source serves a "
                              "broken index" % (origin, index_name, shown(type(weight_map).__name__)))
    shards = sorted(set(weight_map.values()))
    check_file_names(shards, "%s: %s weight_map" % (origin, index_name),
                     "a shard is a file of the model directory; the index came from a source that must be checked")
    return shards


def check_complete(root, revision):
    """Refuse a revision that vLLM could not load as a whole, before it becomes current: config.json must be there,
    and every shard each checkpoint index (*.safetensors.index.json, *.bin.index.json at the top level) names in its
    weight_map must be a regular file of the revision. What checksums or include patterns left out is caught here,
    not when the server starts."""
    origin = "revision %s" % revision
    top = sorted(os.listdir(root))
    if not os.path.isfile(os.path.join(root, CONFIG_FILE)) or os.path.islink(os.path.join(root, CONFIG_FILE)):
        raise ModelStoreError("%s is incomplete: it has no %s, which vLLM reads first (got %s); include it in the "
                              "checksums or patterns" % (origin, CONFIG_FILE, shown(top[:8])))
    for index_name in top:
        if not index_name.endswith(INDEX_SUFFIXES) or not os.path.isfile(os.path.join(root, index_name)):
            continue
        missing = [shard for shard in _index_shards(root, index_name, origin)
                   if os.path.islink(os.path.join(root, shard)) or not os.path.isfile(os.path.join(root, shard))]
        if missing:
            raise ModelStoreError("%s is incomplete: %s names %d shard(s) it does not hold (got missing %s); include "
                                  "every shard in the checksums or patterns"
                                  % (origin, index_name, len(missing), ", ".join(shown(shard) for shard in missing[:5])
                                     + (" and %d more" % (len(missing) - 5) if len(missing) > 5 else "")))


# The top-level directory of a staging directory where each file fetched in ranged parts keeps its record of the
# parts written (vllm_model_s3.RangedFile). Never a model file: a source that lists a file under it is refused
# (vllm_model_fetch's staged file), it is removed before the staging directory is verified, and its bytes are not
# counted as the model's.
PARTS_DIR = ".vllm-model-parts"


def parts_record(staging, name):
    """The path of the parts record of the file name in staging (a flat name: the file's own may have directories)."""
    return os.path.join(staging, PARTS_DIR, hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:32])


def staged_bytes(staging):
    """Bytes of the regular files in a staging directory (what an interrupted run left there) that are on disk: a file
    fetched in ranged parts is created at its full size with holes where parts are missing, so its blocks are
    counted, not its size; the parts records are not. 0 when there is none or it is not a directory of its own (a
    link is never followed)."""
    if os.path.islink(staging) or not os.path.isdir(staging):
        return 0
    total = 0
    for directory, subdirectories, files in os.walk(staging):
        if directory == staging:
            subdirectories[:] = [name for name in subdirectories if name != PARTS_DIR]
        for name in files:
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not os.path.islink(path):
                stat = os.stat(path)
                total += min(stat.st_size, stat.st_blocks * 512)
    return total


def staging_entries(model_dir):
    """The staging entries of a model's directory (directories and archive files interrupted runs left)."""
    if not os.path.isdir(model_dir):
        return []
    return sorted(entry for entry in os.listdir(model_dir) if entry.startswith(STAGING_PREFIX))


def remove_unlisted(staging, listed, keep=()):
    """Remove from staging every file not in listed (relative names) and every entry that is not a regular file or
    directory, except the top-level directories in keep: what a run goes on from is only what its source lists."""
    for directory, subdirectories, files in os.walk(staging, topdown=True):
        relative = os.path.relpath(directory, staging)
        if relative == ".":
            subdirectories[:] = [name for name in subdirectories if name not in keep]
        for name in files + [entry for entry in subdirectories if os.path.islink(os.path.join(directory, entry))]:
            path = os.path.join(directory, name)
            if os.path.islink(path) or not os.path.isfile(path) or os.path.normpath(os.path.join(relative, name)) \
                    not in listed:
                os.unlink(path)


def free_bytes(path):
    """Free bytes on the file system of path (or its nearest existing parent), as an unprivileged writer sees them."""
    while not os.path.exists(path):
        path = os.path.dirname(path)
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def check_free_disk(name, revision, needed, free, reserve_bytes, store):
    """Refuse a placement that would not fit, with the numbers, before the first byte is written."""
    if needed + reserve_bytes > free:
        gib = float(1 << 30)
        raise ModelStoreError(
            "vllm_model_store: not enough free disk for %s at %s (got %d bytes free on %s, %.2f GiB; the model needs "
            "%d bytes, %.2f GiB, plus vllm_model_min_free_disk_gib %.2f GiB); free space there, lower "
            "vllm_model_keep or move vllm_model_store" % (name, revision, free, store, free / gib, needed,
                                                          needed / gib, reserve_bytes / gib))


class TransferRefused(ModelStoreError):
    """A transfer stopped by the cap (the source sent more than it may), or an answer that is not what was asked (a
    ranged part of another length or place). What arrived is never gone on from."""


class TransferInterrupted(ModelStoreError):
    """A transfer stopped before its end (the network, the origin, a timeout): what arrived stays in staging for the
    next run to go on from. Not a refusal (a checksum, a cap, a hostile answer), which removes staging."""


def in_parallel(function, items, workers):
    """[function(item) for every item], up to `workers` at once. After the first error nothing more starts; of the
    errors, a refusal (a cap, a checksum, a hostile answer: staging goes) is raised before an interruption
    (TransferInterrupted: staging stays for the next run)."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(function, item) for item in items]
        wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:
            future.cancel()  # those not started yet
    errors = [future.exception() for future in futures if not future.cancelled() and future.exception() is not None]
    if errors:
        raise next((error for error in errors if not isinstance(error, TransferInterrupted)), errors[0])
    return [future.result() for future in futures]


class TransferCap:
    """What one placement's downloads may write, counted as the bytes arrive (thread-safe: hub and S3 transfers run in
    parallel). Each transfer is held to the size its source announced for it, when it announced one; all of them
    together to `allowed`, the bytes the disk check allowed (free space less vllm_model_min_free_disk_gib). A source
    that announces no size (HTTP without Content-Length, chunked) is thereby capped too: a hostile or broken origin
    that streams without end is cut off before it fills the store's file system."""

    def __init__(self, allowed, name):
        import threading

        self.allowed, self.name, self.written = max(0, allowed), name, 0
        self._lock = threading.Lock()

    def counter(self, what, announced=0):
        """A callable taking each block's byte count of one transfer (what: its URL, shown redacted)."""
        received = [0]

        def count(amount):
            with self._lock:
                received[0] += amount
                over = bool(announced) and received[0] > announced
                if not over:  # refused on its own: other transfers are not charged for it
                    self.written += amount
                total = self.written
            if over:
                raise TransferRefused("vllm_model_models (%s).source: %s sent more than the %d bytes it announced; the "
                                      "transfer was stopped" % (self.name, shown(what), announced))
            if total > self.allowed:
                raise TransferRefused(
                    "vllm_model_models (%s).source: the download passed %d bytes, all that the disk check allowed "
                    "(free space less vllm_model_min_free_disk_gib), at %s, which announced %s; the transfer was "
                    "stopped" % (self.name, self.allowed, shown(what),
                                 "%d bytes" % announced if announced else "no size"))
        return count


# The store: state of one model.

def read_state(model_dir):
    """The state file of a model, every revision and file name in it checked (each becomes a path in the store)."""
    path = os.path.join(model_dir, STATE_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except FileNotFoundError:
        state = {}
    except ValueError as error:
        raise ModelStoreError("%s is not valid JSON (%s); move it away and re-run to place the model again"
                              % (path, error))
    if not isinstance(state, dict):
        raise ModelStoreError("%s is not a state record (got %s); move it away and re-run to place the model again"
                              % (path, shown(state)))
    state.setdefault("refs", {})
    state.setdefault("revisions", {})
    state.setdefault("history", [])
    _check_state(path, state)
    return state


def _check_state(path, state):
    advice = "the file was changed by hand or by someone else: move it away and re-run to place the model again"
    if not isinstance(state["refs"], dict) or not isinstance(state["revisions"], dict):
        raise ModelStoreError("%s: refs and revisions must be mappings (got %s); %s"
                              % (path, shown(sorted(state)), advice))
    for revision, record in state["revisions"].items():
        kind = record.get("kind") if isinstance(record, dict) else None
        check_revision(revision, kind, "%s revision" % path, advice)
        if not isinstance(record, dict) or record.get("revision") != revision or not isinstance(
                record.get("files", {}), dict):
            raise ModelStoreError("%s: the record of %s is not one the store writes (got %s); %s"
                                  % (path, revision, shown(record), advice))
        check_file_names(record.get("files", {}), "%s revision %s" % (path, revision), advice)
    for ref, revision in state["refs"].items():
        check_revision(revision, None, "%s ref %s" % (path, shown(ref)), advice)


def sync_directory(path):
    """fsync a directory, so the names created, renamed or removed in it survive a power loss."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def sync_tree(root):
    """fsync every file under root (links are not followed), then every directory from the deepest up: a revision's
    bytes are on disk before the state says it is placed, so a crash never leaves a recorded revision with holes."""
    directories = []
    for top, dirs, files in os.walk(root):
        directories.append(top)
        for name in files:
            path = os.path.join(top, name)
            if os.path.islink(path):
                continue
            descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
    for path in reversed(directories):
        sync_directory(path)


def write_state(model_dir, state):
    temporary = os.path.join(model_dir, ".state.json.%d" % os.getpid())
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(temporary, 0o640)
    os.replace(temporary, os.path.join(model_dir, STATE_FILE))
    sync_directory(model_dir)


def current_revision(model_dir):
    """The revision current points at: a link to one entry of model_dir; a link anywhere else is refused."""
    link = os.path.join(model_dir, CURRENT)
    if not os.path.islink(link):
        if os.path.lexists(link):
            raise ModelStoreError("%s exists but is not a symlink; move it away so revisions can be switched "
                                  "atomically" % link)
        return None
    target = os.readlink(link)
    if not is_revision(target):
        raise ModelStoreError("%s points at %s, not at a revision of the store (a directory beside it); remove the "
                              "link and re-run, or make a placed revision current with action activate"
                              % (link, shown(target)))
    return target


def entry_path(model_dir, entry):
    """The path of one entry of a model's directory (a revision, a staging directory, a link), proven to stay inside
    it: a single name that is not '.' or '..', and the directory itself no link out. Everything the store writes,
    removes or links goes through here."""
    if (not isinstance(entry, str) or not entry or "/" in entry or entry in (".", "..") or _CONTROL.search(entry)
            or len(entry) > 255):
        raise ModelStoreError("%s: refusing to write or remove %s there: it is not one entry of the model's directory; "
                              "the revision or name came from a source that must be checked" % (model_dir, shown(entry)))
    path = os.path.join(model_dir, entry)
    real = os.path.realpath(model_dir)
    if os.path.dirname(os.path.join(real, entry)) != real or os.path.realpath(os.path.dirname(path)) != real:
        raise ModelStoreError("%s: %s would leave the model's directory; refusing it" % (model_dir, shown(entry)))
    return path


def check_inside(root, path):
    """Refuse path unless it resolves inside root (symlinks followed): a link pointing out is refused."""
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
        raise ModelStoreError("%s resolves to %s, outside %s (a symlink pointing out); remove it and re-run"
                              % (path, real, root))
    return path


def record_stats(root, files):
    """Add each placed file's mtime (ns) and inode to files ({name: entry}, in place): what a re-run compares,
    besides the size, to notice a file changed in place without reading it."""
    for name, entry in files.items():
        stat = os.stat(os.path.join(root, name))
        entry.update(mtime_ns=stat.st_mtime_ns, ino=stat.st_ino)
    return files


def changes(model_dir, revision, record, full=False):
    """What differs between a placed revision's directory (or host link) and its record, [] when intact: the file
    set (a file added beside the weights, a *.py that trust_remote_code would run, or one removed), and per file the
    size, mtime and inode recorded (stat only, so a re-run decides without reading the weights or the network); with
    full, also every file's sha256 (every byte read: for a scheduled run)."""
    root = os.path.join(model_dir, revision)
    if not os.path.isdir(root):
        return ["%s is missing" % root]
    files = record.get("files", {})
    try:
        present = set(list_files(root)) - set(record.get("ignored", []))
    except ModelStoreError as error:
        return [str(error)]
    found = ["%s added" % name for name in sorted(present - set(files))]
    found += ["%s removed" % name for name in sorted(set(files) - present)]
    for name in sorted(set(files) & present):
        entry, stat = files[name], os.stat(os.path.join(root, name))
        for key, value in (("size", stat.st_size), ("mtime_ns", stat.st_mtime_ns), ("ino", stat.st_ino)):
            if entry.get(key) is not None and entry[key] != value:
                found.append("%s changed (%s)" % (name, key.partition("_")[0]))
                break
        else:
            if full and entry.get("sha256") and file_sha256(os.path.join(root, name)) != entry["sha256"]:
                found.append("%s changed (sha256)" % name)
    return found


def intact(model_dir, revision, record, full=False):
    """A placed revision is intact when changes() finds nothing."""
    return not changes(model_dir, revision, record, full)


def switch_current(model_dir, revision):
    """Point current at revision: a new link renamed over the old one, so readers never see neither."""
    entry_path(model_dir, revision)
    if not is_revision(revision):
        raise ModelStoreError("%s: refusing to make %s current: not a revision name" % (model_dir, shown(revision)))
    temporary = os.path.join(model_dir, ".current.%d" % os.getpid())
    if os.path.lexists(temporary):
        os.unlink(temporary)
    os.symlink(revision, temporary)
    os.replace(temporary, os.path.join(model_dir, CURRENT))
    sync_directory(model_dir)


def revisions_to_prune(state, keep, protected):
    """Revisions beyond the newest `keep` (by placement time); protected ones (current, the one that was
    current before this run and may still be served until its server restarts) are never pruned."""
    ordered = sorted(state["revisions"], key=lambda name: state["revisions"][name].get("placed", ""), reverse=True)
    kept = [name for name in ordered if name in protected]
    for name in ordered:
        if name not in kept and len(kept) < keep:
            kept.append(name)
    return [name for name in ordered if name not in kept]


def leftovers(model_dir, state, recorded=True):
    """Staging directories, and revision directories no record knows (an interrupted run). Never the target of
    current nor the revision current before it (the last switch's previous: a server not restarted yet may still
    serve it), never an entry the store does not name itself (a commit, or a label it derived from checksums: what
    an operator put beside is left alone), and when the run found no state file (recorded False: lost, so nothing
    says what the entries are), no revision at all: only staging."""
    if not os.path.isdir(model_dir):
        return []
    history = state["history"][-1:] if isinstance(state["history"], list) else []
    serving = set([current_revision(model_dir)] + [entry.get("previous") for entry in history
                                                   if isinstance(entry, dict)])
    names = []
    for entry in sorted(os.listdir(model_dir)):
        if entry.startswith(STAGING_PREFIX):
            names.append(entry)
        elif (recorded and entry not in state["revisions"] and entry not in serving
              and (is_commit(entry) or _DERIVED.match(entry))):
            names.append(entry)
    return names


def remove_entry(model_dir, entry):
    """Remove one entry of model_dir (entry_path): a link is unlinked, never followed."""
    path = entry_path(model_dir, entry)
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


class ModelLock:
    """One lock per model for a whole action: fcntl.flock on <store>/.<name>.lock, taken without waiting. A second
    run on the same model (another playbook, a retry while the first still runs) is refused with the holder's pid
    instead of deleting the first one's staging. Released when the action ends (or its process dies). In check mode
    nothing is created: the lock is taken only on a lock file a run left."""

    def __init__(self, store, name, check_mode=False):
        self.path = os.path.join(store, ".%s.lock" % name)
        self.store, self.name, self.check_mode, self.handle = store, name, check_mode, None

    def __enter__(self):
        import fcntl

        if self.check_mode:  # writes nothing: takes the lock only where a run left its file
            if not os.path.isfile(self.path):
                return self
            self.handle = open(self.path, encoding="utf-8")
        else:
            if not os.path.isdir(self.store):
                os.makedirs(self.store, 0o750)
            self.handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.seek(0)
            holder = self.handle.read().strip() or "unknown"
            self.handle.close()
            self.handle = None
            raise ModelStoreError("vllm_model_models (%s): another run is placing this model on this host (%s is held "
                                  "by pid %s); wait for it to finish, then re-run" % (self.name, self.path,
                                                                                      shown(holder)))
        if self.check_mode:
            return self
        os.chmod(self.path, 0o600)
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write("%d\n" % os.getpid())
        self.handle.flush()
        return self

    def __exit__(self, *exc):
        if self.handle is not None:
            self.handle.close()  # closing the file releases the lock
            self.handle = None
        return False


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def placed_fact(store, name, record, previous=None):
    """What vllm_serve reads for a model: the stable path, the resolved revision, the revision's own
    directory (a unit that names it changes, and restarts, when the revision does) and the source kind;
    and the revision current before this placement (None on the first), which units written before it
    may still name: vllm_rollout makes it current again when it rolls a host back."""
    return {"path": os.path.join(store, name, CURRENT), "revision": record["revision"],
            "revision_path": os.path.join(store, name, record["revision"]), "source": record["kind"],
            "previous_revision": previous}


def serving_layouts(name, instances, serve_model=""):
    """The layouts the fit check weighs a model against, before its download: one per vllm_serve instance
    that names it (instances: vllm_serve_instances; an instance without a model serves serve_model,
    vllm_serve_model), each with that instance's tensor_parallel_size override and the host's instance
    count, since the instances share the host's NUMA nodes. A model no instance names yet gets the
    single-instance layout: one that cannot fit even alone cannot be served on this host."""
    instances = instances if isinstance(instances, list) else []
    layouts = []
    for index, item in enumerate(instances):
        if not isinstance(item, dict) or item.get("model", serve_model) != name:
            continue
        layouts.append({"variable": "vllm_serve_instances[%d] (%s)" % (index, item.get("name", index)),
                        "tensor_parallel_size": item.get("tensor_parallel_size"), "instances": len(instances),
                        "dtype": item.get("dtype")})
    return layouts or [{"variable": "vllm_model_models (%s)" % name, "tensor_parallel_size": None, "instances": 1,
                        "dtype": None}]
