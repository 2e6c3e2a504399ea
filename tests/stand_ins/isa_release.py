"""A stand-in vLLM release whose kernel library needs one CPU feature, for smoke tests on CPUs we do not have.

Stands in for a vLLM release (a venv holding vllm, its CPU platform code and a compiled kernel library) where
only the CPU's instruction set matters: the real x86_64 wheel's `_C.abi3.so` dies of SIGILL on an AVX2-only
CPU, and an aarch64 wheel compiled with +bf16/+i8mm dies on Neoverse-N1, but no such CPU is in our machines and
no aarch64 CPU build of torch is reachable here. qemu-user presents those CPUs (`-cpu Haswell`,
`QEMU_CPU=neoverse-n1`), and this release's kernel library executes one real instruction of the feature when
it is imported (as the real libraries run code of their ISA when they load), so a CPU without the feature
raises a real SIGILL. The instruction bytes are the architecture manuals' encodings, run from an executable
page through ctypes: no compiler for the other architecture is needed. Tests only; never installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# One instruction of each feature, then a return: machine code, little-endian.
INSTRUCTIONS = {
    # x86_64: vpxor ymm0, ymm0, ymm0 (AVX2) / vpxord zmm0, zmm0, zmm0 (AVX-512F); vzeroupper; ret
    "avx2": "c5fdefc0" + "c5f877" + "c3",
    "avx512f": "62f17d48efc0" + "c5f877" + "c3",
    # aarch64: sdot v0.4s, v0.16b, v0.16b (dotprod) / bfcvt h0, s0 (bf16) / smmla v0.4s, v0.16b, v0.16b (i8mm); ret
    "dotprod": "0094804e" + "c0035fd6",
    "bf16": "0040631e" + "c0035fd6",
    "i8mm": "00a4804e" + "c0035fd6",
}

PLATFORM_CODE = '''"""Stand-in for vLLM's CPU platform (tests/stand_ins/isa_release.py)."""


class CpuPlatform:
    @classmethod
    def import_kernels(cls):
        import vllm._C  # noqa: F401
'''

KERNEL_LIBRARY = '''"""Stand-in for vLLM's kernel library (tests/stand_ins/isa_release.py): runs one %(feature)s instruction."""
import ctypes
import mmap

CODE = bytes.fromhex("%(code)s")
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(CODE)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
ctypes.CFUNCTYPE(None)(address)()
'''


def write_release(root, feature, version="0.32.0+cpu"):
    """Write the release's vllm package (platform code, a kernel library needing `feature`, dist-info) under
    `root`/site; returns that directory, to put on a venv's path."""
    site = Path(root) / "site"
    package = site / "vllm"
    (package / "platforms").mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('__version__ = "%s"\n' % version)
    (package / "platforms" / "__init__.py").write_text("")
    (package / "platforms" / "cpu.py").write_text(PLATFORM_CODE)
    (package / "_C.py").write_text(KERNEL_LIBRARY % {"feature": feature, "code": INSTRUCTIONS[feature]})
    info = site / ("vllm-%s.dist-info" % version)
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: %s\n" % version)
    (info / "top_level.txt").write_text("vllm\n")
    return site


def make_venv(python, venv, site, runner=None):
    """A venv (no pip) made by `python` (through `runner`, a prefix such as a podman run, when given) that sees
    `site` through a .pth file; returns the venv's python path."""
    prefix = list(runner or [])
    subprocess.run(prefix + [python, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    version = subprocess.run(prefix + [str(Path(venv) / "bin" / "python"), "-c",
                                       "import sys; print('%d.%d' % sys.version_info[:2])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    packages = Path(venv) / "lib" / ("python" + version) / "site-packages"
    (packages / "release.pth").write_text(str(site) + "\n")
    return str(Path(venv) / "bin" / "python")


if __name__ == "__main__":
    sys.exit("tests/stand_ins/isa_release.py is imported by tests, not run")
