"""Make the repository importable as ansible_collections.arm_inference.vllm for unit tests.

The checkout is not laid out under ansible_collections/<namespace>/<name>, so a link to it is
placed in a temporary tree that is put first on sys.path.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def _link_collection():
    root = Path(tempfile.mkdtemp(prefix="arm_inference_collections_"))
    namespace = root / "ansible_collections" / "arm_inference"
    namespace.mkdir(parents=True)
    os.symlink(REPO_ROOT, namespace / "vllm")
    sys.path.insert(0, str(root))
    # Ansible's own collection loader (as ansible-test installs it), so that a Templar finds the
    # collection's plugins by their full names: role defaults read contracts through its lookup.
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    _AnsibleCollectionFinder(paths=[str(root)])._install()
    # rmtree removes the link, not the checkout it points to.
    atexit.register(shutil.rmtree, root, True)


_link_collection()
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "upstream: reads vLLM's real sdists from PyPI (cached under .cache/upstream-sdists); needs the network")


@pytest.fixture
def fdopen_modes(monkeypatch):
    """The mode of every file descriptor os.fdopen is given, in order: a module that writes a secret must have made
    its temporary file private before the first byte goes in."""
    modes = []
    real_fdopen = os.fdopen

    def watching(handle, *args, **kwargs):
        modes.append(stat.S_IMODE(os.fstat(handle).st_mode))
        return real_fdopen(handle, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", watching)
    return modes


def make_venv(root):
    """A real venv at `root` (with the pip `python -m venv` installs); returns its Python and pip's version."""
    import subprocess  # pylint: disable=import-outside-toplevel

    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    python = str(Path(root) / "bin" / "python")
    pip = subprocess.run([python, "-I", "-c", "import pip; print(pip.__version__)"], capture_output=True, text=True,
                         check=True).stdout.strip()
    return python, pip


def free_port():
    """A TCP port of 127.0.0.1 nothing listens on now."""
    import socket  # pylint: disable=import-outside-toplevel

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_openai_stand_in(api_key=None, port=None):
    """tests/stand_ins/openai_upstream.py on `port` (default a free one) of 127.0.0.1 (with `api_key`, /v1 without it
    answers 401); returns the process (terminate it) and its base URL."""
    import subprocess  # pylint: disable=import-outside-toplevel

    port = port or free_port()
    process = subprocess.Popen([sys.executable, str(REPO_ROOT / "tests" / "stand_ins" / "openai_upstream.py"), str(port)]
                               + ([api_key] if api_key else []), stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    return process, "http://127.0.0.1:%d" % port
