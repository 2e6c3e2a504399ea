from __future__ import annotations

import os
import struct
import subprocess

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils.shared_library import (
    candidates_from_file_list,
    choose_library,
    normalize_machine,
    parse_ldconfig_cache,
    preload_problem,
    read_elf_header,
)

# `ldconfig -p` from a Debian 12 amd64 host with i386 multiarch enabled (format of glibc 2.36):
# the i386 copy is listed first, which is exactly the trap a path-guessing role falls into.
LDCONFIG_X86_MULTIARCH = """\
554 libs found in cache `/etc/ld.so.cache'
\tlibtcmalloc_minimal.so.4 (libc6) => /lib/i386-linux-gnu/libtcmalloc_minimal.so.4
\tlibtcmalloc_minimal.so.4 (libc6,x86-64) => /lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1
"""

# `dpkg-query -L libtcmalloc-minimal4` on Debian 12 arm64 (package 2.10-1).
DPKG_LIST_ARM64 = """\
/.
/usr
/usr/lib
/usr/lib/aarch64-linux-gnu
/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4.5.10
/usr/share/doc/libtcmalloc-minimal4
/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4
"""


def _elf_header(bits, endian, e_type, e_machine):
    ident = b"\x7fELF" + bytes([{32: 1, 64: 2}[bits], {"<": 1, ">": 2}[endian], 1]) + b"\x00" * 9
    return ident + struct.pack(endian + "HH", e_type, e_machine) + b"\x00" * 44


@pytest.fixture
def elf_files(tmp_path):
    files = {
        "aarch64.so": _elf_header(64, "<", 3, 183),
        "x86_64.so": _elf_header(64, "<", 3, 62),
        "i386.so": _elf_header(32, "<", 3, 3),
        "exec": _elf_header(64, "<", 2, 183),
        "s390x.so": _elf_header(64, ">", 3, 22),
        "text": b"not an elf file at all, just text\n",
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    return tmp_path


def test_elf_header_machine_bits_and_type(elf_files):
    info = read_elf_header(str(elf_files / "aarch64.so"))
    assert (info.machine, info.bits, info.shared) == ("aarch64", 64, True)
    assert read_elf_header(str(elf_files / "i386.so")).bits == 32
    assert read_elf_header(str(elf_files / "s390x.so")).machine == "s390x"
    assert read_elf_header(str(elf_files / "exec")).shared is False
    assert read_elf_header(str(elf_files / "text")) is None
    assert read_elf_header(str(elf_files / "absent")) is None


def test_real_libc_of_this_machine_matches_uname():
    libc = [path for soname, dummy_flags, path in parse_ldconfig_cache(os.popen("ldconfig -p").read()) if soname == "libc.so.6"]
    machine = normalize_machine(os.uname().machine)
    path, rejected = choose_library("libc.so.6", libc, machine)
    assert path is not None, rejected


def test_ldconfig_parse_keeps_every_abi_entry():
    entries = parse_ldconfig_cache(LDCONFIG_X86_MULTIARCH)
    assert entries[0] == ("libtcmalloc_minimal.so.4", "libc6", "/lib/i386-linux-gnu/libtcmalloc_minimal.so.4")
    assert len(entries) == 3


def test_file_list_candidates_match_exact_file_name_only():
    assert candidates_from_file_list(DPKG_LIST_ARM64, "libtcmalloc_minimal.so.4") == [
        "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4"
    ]
    assert candidates_from_file_list(DPKG_LIST_ARM64, "libtcmalloc.so.4") == []


def test_choose_rejects_wrong_architecture_and_explains(elf_files):
    candidates = [str(elf_files / "i386.so"), str(elf_files / "text"), str(elf_files / "x86_64.so")]
    path, rejected = choose_library("lib.so", candidates, "amd64")
    assert path == str(elf_files / "x86_64.so")
    assert rejected[str(elf_files / "i386.so")] == "built for i386, host is x86_64"
    assert rejected[str(elf_files / "text")] == "missing or not an ELF file"


def test_choose_returns_none_when_only_foreign_or_executables(elf_files):
    path, rejected = choose_library("lib.so", [str(elf_files / "x86_64.so"), str(elf_files / "exec")], "aarch64")
    assert path is None
    assert rejected[str(elf_files / "exec")] == "ELF file is not a shared object"
    assert rejected[str(elf_files / "x86_64.so")] == "built for x86_64, host is aarch64"


def test_choose_with_no_candidates():
    assert choose_library("lib.so", [], "aarch64") == (None, {})


def _preloaded(library):
    """What a real process started with LD_PRELOAD=library maps, and what the dynamic linker says, as the module asks."""
    ran = subprocess.run(["cat", "/proc/self/maps"], env=dict(os.environ, LD_PRELOAD=library, LANG="C", LC_ALL="C"),
                         capture_output=True, text=True, check=True)
    return ran.stdout, ran.stderr


def test_a_real_library_preloaded_is_mapped():
    found = [path for soname, dummy_flags, path in parse_ldconfig_cache(os.popen("ldconfig -p").read()) if soname == "libz.so.1"]
    path, rejected = choose_library("libz.so.1", found, normalize_machine(os.uname().machine))
    assert path is not None, rejected
    maps, stderr = _preloaded(path)
    assert preload_problem(path, os.path.realpath(path), maps, stderr) is None


def test_a_file_that_is_no_library_is_not_preloaded_and_says_why(tmp_path):
    """The dynamic linker warns and runs the process anyway: only the memory map tells."""
    bogus = tmp_path / "libtcmalloc_minimal.so.4"
    bogus.write_text("not an ELF file\n")
    maps, stderr = _preloaded(str(bogus))
    problem = preload_problem(str(bogus), str(bogus), maps, stderr)
    assert problem.startswith("a process started with LD_PRELOAD=%s did not map %s: " % (bogus, bogus))
    assert "cannot be preloaded" in problem and "\n" not in problem
    # A library mapped under another name (a stale link) is not the one asked for.
    assert preload_problem("/x/lib.so", "/x/lib.so.1.2", "7f00-7f01 r--p 0 08:01 1 /x/lib.so.1.2.3\n", "") is not None
