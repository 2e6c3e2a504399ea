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


def main():
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    shutil.rmtree(TARGET, ignore_errors=True)
    for name in filter(None, files):
        source = REPO_ROOT / name.decode()
        if source.is_file():
            destination = TARGET / name.decode()
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
