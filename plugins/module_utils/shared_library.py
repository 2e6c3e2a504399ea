# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Locate a shared library for the running machine's architecture.

Paths differ by distro and architecture (Debian multiarch /usr/lib/aarch64-linux-gnu, RHEL
/usr/lib64, merged-/usr aliases, i386 multilib copies on x86_64 hosts), so the answer is taken
from what the package manager installed and what the dynamic linker's cache lists, and every
candidate is checked to be an ELF shared object built for this machine.
"""

from __future__ import annotations

import os
import re
import struct

# ELF e_machine values (System V gABI / elf.h) for the architectures we may meet.
ELF_MACHINES = {
    3: "i386",
    40: "arm",
    62: "x86_64",
    183: "aarch64",
    21: "ppc64",
    22: "s390x",
    243: "riscv64",
}

_ELF_MAGIC = b"\x7fELF"
_ET_DYN = 3
_LDCONFIG_LINE = re.compile(r"^\s*(?P<soname>\S+)\s+\((?P<flags>[^)]*)\)\s+=>\s+(?P<path>\S+)\s*$")


class ElfInfo:
    """What the ELF header of a file says about it."""

    def __init__(self, machine, bits, shared):
        self.machine = machine
        self.bits = bits
        self.shared = shared


def read_elf_header(path):
    """Return ElfInfo for `path`, or None when the file is not a readable ELF object."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(20)
    except OSError:
        return None
    if len(header) < 20 or header[:4] != _ELF_MAGIC:
        return None
    bits = {1: 32, 2: 64}.get(header[4])
    endian = {1: "<", 2: ">"}.get(header[5])
    if bits is None or endian is None:
        return None
    e_type, e_machine = struct.unpack(endian + "HH", header[16:20])
    return ElfInfo(ELF_MACHINES.get(e_machine, "elf-machine-%d" % e_machine), bits, e_type == _ET_DYN)


def normalize_machine(machine):
    """Map `uname -m` spellings to the names used in ELF_MACHINES."""
    return {"arm64": "aarch64", "amd64": "x86_64", "i686": "i386", "i586": "i386"}.get(machine, machine)


def parse_ldconfig_cache(text):
    """Return [(soname, flags, path)] from `ldconfig -p` output."""
    entries = []
    for line in text.splitlines():
        match = _LDCONFIG_LINE.match(line)
        if match:
            entries.append((match.group("soname"), match.group("flags"), match.group("path")))
    return entries


def candidates_from_file_list(text, soname):
    """Paths from a package file list (dpkg-query -L / rpm -ql) whose file name is exactly `soname`."""
    return [line.strip() for line in text.splitlines() if os.path.basename(line.strip()) == soname]


def choose_library(soname, candidates, machine, reader=read_elf_header):
    """Pick the first candidate that is an ELF shared object for `machine`.

    Returns (path, rejected) where rejected maps each refused candidate to the reason, so the
    caller can explain a failure instead of guessing a path.
    """
    machine = normalize_machine(machine)
    rejected = {}
    seen = set()
    for path in candidates:
        if path in seen:
            continue
        seen.add(path)
        info = reader(path)
        if info is None:
            rejected[path] = "missing or not an ELF file"
        elif not info.shared:
            rejected[path] = "ELF file is not a shared object"
        elif info.machine != machine:
            rejected[path] = "built for %s, host is %s" % (info.machine, machine)
        else:
            return path, rejected
    return None, rejected


def preload_problem(library, real_path, maps, stderr):
    """Why a process started with LD_PRELOAD=`library` did not get it, from that process's /proc/self/maps and its
    stderr; None when it mapped `real_path`. The dynamic linker only warns (and carries on) when LD_PRELOAD names an
    unusable file, so a wrong path would silently run vLLM without the library."""
    if "cannot be preloaded" not in stderr and any(line.rstrip().endswith(" " + real_path) for line in maps.splitlines()):
        return None
    return "a process started with LD_PRELOAD=%s did not map %s: %s" % (
        library, real_path, " ".join(stderr.split()) or "the library is not in its memory map")
