"""Run `ansible-test sanity` on this checkout, with the ansible-core of the Python that runs this script.

ansible-test needs the collection at ansible_collections/<namespace>/<name> and refuses symlinked
paths, so the files git knows (tracked and new, not ignored) are copied there first. The copy lives
outside the checkout: inside it, ansible-test would find our .git and see only git's (ignored) view.
`make sanity` runs it with the pinned toolchain (.venv) and again with the newest ansible-core
(tests/sanity/newest_core.py), each with its own copy.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# One copy per checkout: two checkouts' sanity runs on one machine (a CI clone beside a working tree) would
# otherwise overwrite each other's copy mid-run.
CHECKOUT = hashlib.sha1(str(REPO_ROOT).encode()).hexdigest()[:8]
TARGET = Path(os.environ.get("SANITY_ROOT", "/var/tmp/arm-inference-sanity-" + CHECKOUT)) / "ansible_collections/arm_inference/vllm"
# ansible-test and its package next to this interpreter: .venv's, or the newest core's venv.
ANSIBLE_TEST = Path(sys.executable).parent / "ansible-test"


def bootstrap_pip_version():
    """The get-pip version this ansible-test asks for (24.2 for 2.19, 25.2 for 2.21): its pinned pip."""
    spec = importlib.util.find_spec("ansible_test")
    source = (Path(spec.origin).parent / "_internal" / "python_requirements.py").read_text()
    found = re.search(r"\bpip='([0-9.]+)'", source)
    if not found:
        raise SystemExit("cannot find the pip version ansible-test pins in %s" % spec.origin)
    return found.group(1)


SKIPPED_DIRS = {".git", ".venv", ".cache", ".ansible", "build", "__pycache__", ".pytest_cache"}


def collection_files():
    """Files git tracks or would track; every file outside generated directories without git."""
    listing = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=False,
    ) if shutil.which("git") else None
    if listing is not None and listing.returncode == 0:
        return [name.decode() for name in listing.stdout.split(b"\0") if name]
    return [
        str(path.relative_to(REPO_ROOT))
        for path in REPO_ROOT.rglob("*")
        if path.is_file() and not SKIPPED_DIRS.intersection(path.relative_to(REPO_ROOT).parts)
    ]


def main():
    shutil.rmtree(TARGET, ignore_errors=True)
    for name in collection_files():
        source = REPO_ROOT / name
        if source.is_file():
            destination = TARGET / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
    cache = Path.home() / ".ansible" / "test" / "cache" / ("get_pip_%s.py" % bootstrap_pip_version().replace(".", "_"))
    cache.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO_ROOT / "tests" / "sanity" / "get_pip_bootstrap.py", cache)
    python = "%d.%d" % sys.version_info[:2]
    command = [str(ANSIBLE_TEST) if ANSIBLE_TEST.exists() else "ansible-test", "sanity", "--python", python, "--requirements", "--color", "no"] + sys.argv[1:]
    print("+ " + " ".join(command), flush=True)
    return subprocess.run(command, cwd=TARGET, env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=""), check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
