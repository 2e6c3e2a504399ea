"""Syntax-check the playbooks and run `ansible-test sanity` on the newest ansible-core as well.

The pinned toolchain (.venv, requirements-dev.txt) is ansible-core 2.19, the collection's floor. This
script keeps a second virtual environment with only ansible-core NEWEST_CORE under .cache and runs
the same checks with it, so that a change the newest core rejects is seen before a user meets it. With
SANITY_CORE=X.Y.Z it does the same for that core instead.

ansible-core 2.20 and newer need Python >= 3.12, which Debian 12 does not ship: the interpreter is
NEWEST_CORE_PYTHON when set, else the first python3.13/python3.12 on PATH or under ~/.pyenv. Without
one this prints why it skips and exits 0, so that `make sanity` still runs on a fresh Debian 12
machine; with ARM_INFERENCE_REQUIRE_NEWEST_CORE=1 a missing interpreter fails instead.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# The newest ansible-core release when this was written; raise it with each new core. SANITY_CORE names another
# core that needs Python >= 3.12 (`make galaxy` runs the ones between the floor and this one).
NEWEST_CORE = os.environ.get("SANITY_CORE") or "2.21.5"
VENV = REPO_ROOT / ".cache" / ("ansible-core-%s" % NEWEST_CORE)
# One copy per checkout and core (see run_sanity.py's TARGET).
SANITY_ROOT = "/var/tmp/arm-inference-sanity-%s-%s" % (NEWEST_CORE, hashlib.sha1(str(REPO_ROOT).encode()).hexdigest()[:8])
MINIMUM_PYTHON = (3, 12)
# Every sanity test, pylint included: its ansible-specific checks (deprecated APIs) change with the core.
SANITY_ARGS = []


def log(message):
    print("[newest-core] %s" % message, flush=True)


def python_version(executable):
    probe = subprocess.run([executable, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return None
    return tuple(int(part) for part in probe.stdout.strip().split("."))


def find_python():
    candidates = [os.environ.get("NEWEST_CORE_PYTHON", "")]
    candidates += [shutil.which(name) or "" for name in ("python3.13", "python3.12")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")), reverse=True)
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and (python_version(candidate) or (0,)) >= MINIMUM_PYTHON:
            return candidate
    return None


def ensure_venv(python):
    interpreter = VENV / "bin" / "python"
    if not (VENV / "bin" / "ansible-test").exists():
        log("creating %s with ansible-core %s (%s)" % (VENV, NEWEST_CORE, python))
        subprocess.run([python, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(interpreter), "-m", "pip", "install", "-q", "ansible-core==%s" % NEWEST_CORE], check=True)
    return interpreter


def main():
    python = find_python()
    if sys.argv[1:] == ["--available"]:
        # For the Makefile: whether this run will happen (then the pinned core's run leaves pylint to it).
        return 0 if python else 1
    if python is None:
        message = ("no Python >= %d.%d found (ansible-core %s needs it; set NEWEST_CORE_PYTHON)"
                   % (MINIMUM_PYTHON + (NEWEST_CORE,)))
        if os.environ.get("ARM_INFERENCE_REQUIRE_NEWEST_CORE") == "1":
            log("failed: " + message)
            return 1
        log("skipped: " + message)
        return 0
    interpreter = ensure_venv(python)
    bin_dir = str(interpreter.parent)
    environment = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
                       ANSIBLE_COLLECTIONS_PATH=str(REPO_ROOT / ".cache" / "collections"))
    playbooks = sorted(str(path.relative_to(REPO_ROOT)) for path in (REPO_ROOT / "playbooks").glob("*.yml"))
    started = time.monotonic()
    syntax = subprocess.run([os.path.join(bin_dir, "ansible-playbook"), "--syntax-check",
                             "-i", "inventories/example/hosts.yml"] + playbooks,
                            cwd=REPO_ROOT, env=environment, check=False)
    log("syntax-check of %d playbooks: rc %d, %.0f s" % (len(playbooks), syntax.returncode, time.monotonic() - started))
    started = time.monotonic()
    sanity = subprocess.run([str(interpreter), str(REPO_ROOT / "tests" / "sanity" / "run_sanity.py")] + SANITY_ARGS + sys.argv[1:],
                            cwd=REPO_ROOT, env=dict(environment, SANITY_ROOT=SANITY_ROOT), check=False)
    log("ansible-test sanity: rc %d, %.0f s" % (sanity.returncode, time.monotonic() - started))
    return syntax.returncode or sanity.returncode


if __name__ == "__main__":
    sys.exit(main())
