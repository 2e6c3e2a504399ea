"""Run `ansible-test sanity` on this checkout.

ansible-test needs the collection at ansible_collections/<namespace>/<name> and refuses symlinked
paths, so the files git knows (tracked and new, not ignored) are copied there first. The copy lives
outside the checkout: inside it, ansible-test would find our .git and see only git's (ignored) view.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("SANITY_ROOT", "/var/tmp/arm-inference-sanity")) / "ansible_collections/arm_inference/vllm"
PIP_VERSION = "24.2"  # the get-pip version ansible-test 2.19 asks for


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
    cache = Path.home() / ".ansible" / "test" / "cache" / ("get_pip_%s.py" % PIP_VERSION.replace(".", "_"))
    cache.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO_ROOT / "tests" / "sanity" / "get_pip_bootstrap.py", cache)
    python = "%d.%d" % sys.version_info[:2]
    command = ["ansible-test", "sanity", "--python", python, "--requirements", "--color", "no"] + sys.argv[1:]
    print("+ " + " ".join(command), flush=True)
    return subprocess.run(command, cwd=TARGET, env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=""), check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
