"""vllm_build's release smoke test on CPUs this machine is not: an AVX2-only x86_64 (qemu-user's Haswell, whose
TCG has AVX2 and no AVX-512) and Arm Neoverse-N1 (no BF16, no I8MM) beside qemu's `max` Arm CPU (both), through
the module_utils code the vllm_release_smoke module runs, with a `run` that starts the release's Python on the
emulated CPU. The releases are tests/stand_ins/isa_release.py's: a kernel library that runs one real instruction
of its feature when it loads, so a CPU without it raises a real SIGILL. The real x86_64 wheel on the emulated
Haswell is the engine scenario's (molecule/shared/tests/test_engine.py).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

import harness
from stand_ins import isa_release

# The checkout as ansible_collections.arm_inference.vllm, made importable the way the unit tests and the preflight
# matrix (in the same pytest process) make it: the module_utils the module runs, not a copy.
sys.path.insert(0, str(harness.REPO_ROOT / "tests" / "unit"))
import input_rules_doc  # noqa: E402

input_rules_doc.imports()
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build  # noqa: E402

HASWELL = ["qemu-x86_64-static", "-cpu", "Haswell"]
ARM_IMAGE = "debian12-arm64"


def smoke(python, prefix, cpu):
    """vllm_build's smoke test of the release at `python`, started through `prefix` (the emulated CPU)."""
    def run(argv, cwd=None):
        done = subprocess.run(prefix + argv, capture_output=True, text=True, cwd=cwd, check=False)
        return done.returncode, done.stdout, done.stderr
    return vllm_build.smoke_test(python, [], "+cpu", run, cpu=cpu)


@pytest.fixture(scope="module")
def x86_releases(tmp_path_factory):
    if shutil.which(HASWELL[0]) is None:
        pytest.fail("qemu-x86_64-static is missing: run `python3 tests/harness setup-host` (package qemu-user-static)")
    root = tmp_path_factory.mktemp("x86")
    return {feature: isa_release.make_venv("python3", root / feature / "venv",
                                           isa_release.write_release(root / feature, feature))
            for feature in ("avx2", "avx512f")}


def test_an_avx2_release_passes_on_an_emulated_avx2_only_cpu(x86_releases):
    found = smoke(x86_releases["avx2"], HASWELL, {"host_class": "x86_64-avx2"})
    assert found["version"] == "0.32.0+cpu"


def test_an_avx512_release_on_an_avx2_only_cpu_names_sigill_and_both_classes(x86_releases):
    cpu = {"host_class": "x86_64-avx2", "release_class": "x86_64-avx512f-avx512bf16", "model": "AMD EPYC 7B12"}
    with pytest.raises(vllm_build.BuildError) as raised:
        smoke(x86_releases["avx512f"], HASWELL, cpu)
    message = str(raised.value)
    assert "was killed by SIGILL (illegal instruction)" in message
    assert "while loading vLLM's kernels" in message
    assert "this host's CPU (AMD EPYC 7B12) is build class x86_64-avx2" in message
    assert "the release was made for build class x86_64-avx512f-avx512bf16" in message
    assert "instructions this CPU does not have (avx512f, avx512bf16)" in message
    assert "vllm_build_wheel" in message


@pytest.fixture(scope="module")
def arm_root(tmp_path_factory):
    """Releases for aarch64 in a directory mounted at the same path into Debian 12 arm64 containers."""
    harness.ensure_binfmt()
    root = tmp_path_factory.mktemp("arm64")
    for feature in ("dotprod", "bf16"):
        isa_release.write_release(root / feature, feature)
    return root


def arm_prefix(root, cpu):
    """Start a command in a throw-away Debian 12 arm64 container whose qemu-user presents `cpu`. A shell stays
    PID 1: the kernel ignores a default-action signal sent to a namespace's init, so a qemu-user that re-raises
    its guest's SIGILL on itself as PID 1 hangs instead of dying; the shell reports it as 128 + 4."""
    return ["podman", "run", "--rm", "--network", "none", "-e", "QEMU_CPU=" + cpu, "-v", "%s:%s" % (root, root),
            harness.image_tag(ARM_IMAGE), "sh", "-c", '"$@"; exit $?', "sh"]


@pytest.fixture(scope="module")
def arm_releases(arm_root):
    prefix = arm_prefix(arm_root, "max")
    return {feature: isa_release.make_venv("python3", arm_root / feature / "venv", arm_root / feature / "site", prefix)
            for feature in ("dotprod", "bf16")}


@pytest.mark.parametrize("cpu", ["neoverse-n1", "max"])
def test_a_dotprod_release_passes_on_neoverse_n1_and_max(arm_root, arm_releases, cpu):
    assert smoke(arm_releases["dotprod"], arm_prefix(arm_root, cpu), {})["version"] == "0.32.0+cpu"


def test_a_bf16_release_passes_on_a_cpu_with_bf16(arm_root, arm_releases):
    assert smoke(arm_releases["bf16"], arm_prefix(arm_root, "max"), {})["version"] == "0.32.0+cpu"


def test_a_bf16_release_on_neoverse_n1_names_sigill_and_what_it_lacks(arm_root, arm_releases):
    cpu = {"host_class": "aarch64-dotprod-fp16", "release_class": "aarch64-dotprod-fp16-bf16-i8mm",
           "model": "Neoverse-N1"}
    with pytest.raises(vllm_build.BuildError) as raised:
        smoke(arm_releases["bf16"], arm_prefix(arm_root, "neoverse-n1"), cpu)
    message = str(raised.value)
    assert "was killed by SIGILL (illegal instruction) while loading vLLM's kernels" in message
    assert "build class aarch64-dotprod-fp16; the release was made for build class aarch64-dotprod-fp16-bf16-i8mm" \
        in message
    assert "(bf16, i8mm)" in message
