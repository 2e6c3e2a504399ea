# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM source archives: finding an sdist on a package index, checking and unpacking tarballs.

Used by the vllm_source_archive module for vllm_build_method=archive and =sdist. Pure functions
apart from the file helpers, so that index parsing and member checks are unit tested offline.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import posixpath
import re
import shutil
import tarfile
from html.parser import HTMLParser
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from ansible_collections.arm_inference.vllm.plugins.module_utils.input_message import (
    input_message,
    redact_urls,
)

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar")
DEFAULT_INDEX_URL = "https://pypi.org/simple/"
# Written last into an unpacked tree: a tree without it (an interrupted unpack) is never used.
MARKER = ".arm-inference-archive.json"
_NAME_RUN = re.compile(r"[-_.]+")


class SourceError(Exception):
    """An archive, index or tree the role must refuse, with a message for the operator."""


def normalize_name(name):
    """PEP 503 normalized project name: vLLM, vllm and v_llm are the same project."""
    return _NAME_RUN.sub("-", str(name)).lower()


def archive_label(filename):
    """The readable part of an archive's file name (vllm-0.32.0.tar.gz -> vllm-0.32.0), or None."""
    base = posixpath.basename(str(filename))
    for suffix in ARCHIVE_SUFFIXES:
        if base.lower().endswith(suffix) and len(base) > len(suffix):
            return base[:-len(suffix)]
    return None


def sdist_matches(filename, name, version):
    """Whether filename is the sdist of name==version (old sdists keep the project's spelling)."""
    label = archive_label(filename)
    if label is None or "-" not in label:
        return False
    file_name, file_version = label.rsplit("-", 1)
    return normalize_name(file_name) == normalize_name(name) and file_version == str(version)


class _AnchorParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []
        self._href = None
        self._text = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def parse_index_page(text, base_url):
    """Files listed on a simple-index project page or a find-links page.

    Understands PEP 691 JSON and PEP 503 HTML. Returns dicts with filename, url (absolute, without
    the hash fragment) and sha256 (None when the page gives no sha256).
    """
    stripped = text.lstrip()
    files = []
    if stripped.startswith("{"):
        try:
            document = json.loads(stripped)
        except ValueError as error:
            raise SourceError("The index page %s is not valid JSON: %s" % (base_url, error)) from error
        for entry in document.get("files", []):
            if isinstance(entry, dict) and entry.get("filename") and entry.get("url"):
                files.append({"filename": entry["filename"], "url": urljoin(base_url, entry["url"]),
                              "sha256": (entry.get("hashes") or {}).get("sha256")})
        return files
    parser = _AnchorParser()
    parser.feed(text)
    for href, label in parser.links:
        if not href:
            continue
        absolute, fragment = urldefrag(urljoin(base_url, href))
        filename = unquote(posixpath.basename(urlsplit(absolute).path)) or label
        digest = fragment[len("sha256="):] if fragment.startswith("sha256=") else None
        files.append({"filename": filename, "url": absolute, "sha256": digest})
    return files


def pick_sdist(files, name, version, where):
    """The sdist of name==version among an index's files, or an error naming the versions there."""
    for entry in files:
        if sdist_matches(entry["filename"], name, version):
            return entry
    versions = []
    for entry in files:
        label = archive_label(entry["filename"])
        if label and "-" in label and normalize_name(label.rsplit("-", 1)[0]) == normalize_name(name):
            versions.append(label.rsplit("-", 1)[1])
    seen = ", ".join(versions[-8:]) if versions else "none"
    raise SourceError(input_message(
        "vllm_build_sdist", "no source distribution of %s==%s at %s (sdists there: %s)"
        % (name, version, redact_urls(where), seen), "%s==%s" % (name, version),
        "pick a version the index has, or point vllm_build_sdist_index_url at an index that has it"))


def read_pip_config(text):
    """Index settings of a pip.conf: index_url, extra_index_urls, find_links, no_index, cert."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as error:
        raise SourceError("Cannot read the pip configuration: %s" % error) from error
    merged = {}
    for section in ("global", "download", "install"):
        if parser.has_section(section):
            merged.update({key.replace("_", "-"): value for key, value in parser.items(section)})
    truthy = ("1", "true", "yes", "on")
    return {
        "index_url": merged.get("index-url", "").strip() or None,
        "extra_index_urls": merged.get("extra-index-url", "").split(),
        "find_links": merged.get("find-links", "").split(),
        "no_index": merged.get("no-index", "").strip().lower() in truthy,
        "cert": merged.get("cert", "").strip() or None,
    }


def sdist_locations(name, pip_config, index_url=None):
    """Pages to look for an sdist on, in pip's order: find-links, then the index and extra indexes."""
    config = pip_config or {"index_url": None, "extra_index_urls": [], "find_links": [], "no_index": False}
    pages = list(config.get("find_links") or [])
    if index_url:
        indexes = [index_url]
    elif config.get("no_index"):
        indexes = []
    else:
        indexes = [config.get("index_url") or DEFAULT_INDEX_URL] + list(config.get("extra_index_urls") or [])
    pages += [index.rstrip("/") + "/" + normalize_name(name) + "/" for index in indexes]
    return pages


def sdist_sha256(found, pinned):
    """The sha256 an sdist from an index must have: the pin (which the index may not contradict), else
    the index's own. An index that publishes none (a find-links directory, some mirrors) needs a pin:
    an unverified download is never built."""
    published = (found.get("sha256") or "").lower() or None
    pinned = (pinned or "").lower() or None
    if pinned and published and pinned != published:
        raise SourceError(input_message(
            "vllm_build_archive_sha256", "the index publishes sha256 %s for %s, but %s was expected"
            % (published, redact_urls(found["url"]), pinned), pinned,
            "check which file you pinned and correct the pin, or the index"))
    if not (pinned or published):
        raise SourceError(input_message(
            "vllm_build_archive_sha256", "%s comes with no sha256 from its index" % redact_urls(found["url"]), pinned or "",
            "set vllm_build_archive_sha256 to the sdist's sha256 (it is not downloaded unverified)"))
    return pinned or published


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _inside(root, path):
    return path == root or path.startswith(root + os.sep)


def check_members(members, dest):
    """Refuse members that would land outside dest, special files and links that point outside.

    Paths are checked before anything is unpacked, so a path through a symlink of the same archive
    cannot be resolved yet: a member below another member that is a symlink is refused outright
    (d -> .., then d/x would otherwise be written outside).
    """
    root = os.path.realpath(dest)
    symlinks = {posixpath.normpath(member.name) for member in members if member.issym()}
    for member in members:
        target = os.path.realpath(os.path.join(root, member.name))
        if member.name.startswith("/") or not _inside(root, target):
            raise SourceError("The archive member %r would be written outside the source tree." % member.name)
        parent = posixpath.dirname(posixpath.normpath(member.name))
        while parent not in ("", ".", "/"):
            if parent in symlinks:
                raise SourceError("The archive member %r lies below %r, a symbolic link of the same archive." % (member.name, parent))
            parent = posixpath.dirname(parent)
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            raise SourceError("The archive member %r is a device or FIFO; a source archive has none." % member.name)
        if member.issym() or member.islnk():
            base = os.path.dirname(target) if member.issym() else root
            link = os.path.realpath(os.path.join(base, member.linkname))
            if member.linkname.startswith("/") or not _inside(root, link):
                raise SourceError("The archive member %r links outside the source tree (%r)." % (member.name, member.linkname))


def unpack(archive, dest):
    """Unpack archive into dest (which must not exist) and return the tree's root.

    Sdists and GitHub tarballs hold one top directory (vllm-0.32.0/); the tree is that directory.
    """
    label = archive_label(archive)
    if label is None:
        raise SourceError("%s is not a tar archive (%s)." % (archive, ", ".join(ARCHIVE_SUFFIXES)))
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            check_members(members, dest)
            os.makedirs(dest)
            for member in members:
                # Owners and modes from elsewhere are not kept: whoever unpacks owns the tree.
                member.uid, member.gid = os.getuid(), os.getgid()
                member.uname = member.gname = ""
                member.mode = (member.mode | 0o600) & 0o755 if not member.isdir() else 0o755
                tar.extract(member, dest, set_attrs=not (member.issym() or member.islnk()))
    except (tarfile.TarError, EOFError) as error:
        raise SourceError("%s is not a readable tar archive: %s" % (archive, error)) from error
    entries = os.listdir(dest)
    if len(entries) == 1 and os.path.isdir(os.path.join(dest, entries[0])):
        return os.path.join(dest, entries[0])
    return dest


def read_marker(tree):
    try:
        with open(os.path.join(tree, MARKER), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def install_tree(archive, sha256, tree, record):
    """Make tree the unpacked archive, atomically; an existing tree of the same archive is kept.

    Returns True when the tree changed. The tree appears under its final name only complete.
    """
    marker = read_marker(tree)
    if marker and marker.get("sha256") == sha256:
        return False
    staging = tree + ".unpacking"
    retired = tree + ".old"
    for leftover in (staging, retired):
        shutil.rmtree(leftover, ignore_errors=True)
    root = unpack(archive, staging)
    with open(os.path.join(root, MARKER), "w", encoding="utf-8") as handle:
        json.dump(dict(record, sha256=sha256), handle, sort_keys=True)
    if os.path.lexists(tree):
        os.rename(tree, retired)
    os.rename(root, tree)
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(retired, ignore_errors=True)
    return True
