# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model archives (an https:// source whose URL ends in .tar.gz, .zip, ...): members checked, weighed, extracted.

The archive is read twice: once for its members list (every member checked before anything is written, and the
exact sizes weighed by the caller), then member by member into the staging directory, each file created anew
(O_EXCL, O_NOFOLLOW) and written from the archive's stream. Nothing is taken from the archive but regular files,
directories and their names: no links, devices, owners or modes (the store sets its own). Never extractall.
"""

from __future__ import annotations

import lzma
import os
import re
import stat
import tarfile
import zipfile
import zlib

from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_model_store import ModelStoreError, shown

# What goes wrong while reading a damaged archive, from the archive modules and their decompressors.
_READ_ERRORS = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, RuntimeError, ValueError,
                OSError)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Member:
    """One file or directory of the model: its path in the model directory, its size, the archive's entry."""

    def __init__(self, path, size, directory, entry):
        self.path, self.size, self.directory, self.entry = path, size, directory, entry


def _kind_problem(entry):
    """Why an archive entry is not a regular file or a directory, or None when it is one."""
    if isinstance(entry, zipfile.ZipInfo):
        mode = entry.external_attr >> 16
        if entry.flag_bits & 0x1:
            return "is encrypted"
        if entry.is_dir() or stat.S_IFMT(mode) in (0, stat.S_IFREG, stat.S_IFDIR):
            return None
        return "is a symbolic link" if stat.S_ISLNK(mode) else "is a device, FIFO or socket"
    if entry.isreg() or entry.isdir():
        return None
    if entry.issym():
        return "is a symbolic link (to %s)" % shown(entry.linkname)
    if entry.islnk():
        return "is a hard link (to %s)" % shown(entry.linkname)
    return "is a device or FIFO"


def _name_parts(name):
    """The parts of a member's name; '.' and empty parts (./config.json, a//b) are dropped."""
    return [part for part in name.split("/") if part not in ("", ".")]


class ModelArchive:
    """An archive file on the host, opened once; variable and source name it in every message."""

    def __init__(self, path, archive_name, variable, source):
        self.variable, self.source = variable, source
        self.zip = archive_name.lower().endswith(".zip")
        try:
            self.handle = zipfile.ZipFile(path) if self.zip else tarfile.open(path, "r:*")
        except _READ_ERRORS as error:
            raise self.error("cannot be read as a %s archive (%s: %s)" % ("zip" if self.zip else "tar",
                                                                          type(error).__name__, error))

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.handle.close()

    def error(self, problem):
        return ModelStoreError("%s: the archive %s (got %s); rebuild it from the model directory: regular files and "
                               "directories only, relative names" % (self.variable, problem, shown(self.source)))

    def members(self):
        """The files and directories of the model, each checked; one common top-level directory is stripped
        (qwen/config.json becomes config.json). Refuses absolute names, '..', links and special files."""
        try:
            entries = self.handle.infolist() if self.zip else self.handle.getmembers()
        except _READ_ERRORS as error:
            raise self.error("cannot be read (%s: %s)" % (type(error).__name__, error))
        found = []
        for entry in entries:
            name = entry.filename if self.zip else entry.name
            problem = _kind_problem(entry)
            if problem:
                raise self.error("member %s %s" % (shown(name), problem))
            parts = _name_parts(name)
            if name.startswith("/"):
                raise self.error("member %s has an absolute name" % shown(name))
            if ".." in parts:
                raise self.error("member %s leads out of the model directory with '..'" % shown(name))
            if _CONTROL.search(name):
                raise self.error("member %s has control characters in its name" % shown(name))
            directory = entry.is_dir() if self.zip else entry.isdir()
            if parts:  # "." or "./", the archive's own root
                found.append(Member(parts, 0 if directory else (entry.file_size if self.zip else entry.size),
                                    directory, entry))
        tops = set(member.path[0] for member in found)
        if len(tops) == 1 and all(len(member.path) > 1 or member.directory for member in found):
            found = [member for member in found if len(member.path) > 1]
            for member in found:
                member.path = member.path[1:]
        for member in found:
            member.path = "/".join(member.path)
        self._check_tree(found)
        return found

    def _check_tree(self, members):
        files, directories = set(), set()
        for member in members:
            if member.path in files or (member.path in directories and not member.directory):
                raise self.error("member %s appears twice" % shown(member.path))
            (directories if member.directory else files).add(member.path)
        for path in files | directories:
            parent = os.path.dirname(path)
            while parent:
                if parent in files:
                    raise self.error("member %s lies below %s, which is a file" % (shown(path), shown(parent)))
                parent = os.path.dirname(parent)
        if not files:
            raise self.error("holds no files")

    def extract(self, members, root):
        """Write members (from members()) under root, one by one: directories 0700, files 0600, new files only."""
        for member in members:
            target = os.path.join(root, member.path)
            if member.directory:
                os.makedirs(target, 0o700, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), 0o700, exist_ok=True)
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            written = 0
            with os.fdopen(descriptor, "wb") as output:
                try:
                    stream = self.handle.open(member.entry) if self.zip else self.handle.extractfile(member.entry)
                    with stream:
                        for block in iter(lambda: stream.read(1 << 20), b""):
                            written += len(block)
                            if written > member.size:
                                break
                            output.write(block)
                except _READ_ERRORS as error:
                    raise self.error("member %s cannot be read (%s: %s)" % (shown(member.path), type(error).__name__,
                                                                            error))
            if written != member.size:
                raise self.error("member %s holds %s bytes, its header says %d" % (
                    shown(member.path), "more than %d" % member.size if written > member.size else written,
                    member.size))
