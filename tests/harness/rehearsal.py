"""`make real-build`: vllm_build on vLLM's own source tree, outside CI. PyPI's sdist of vLLM (vllm==0.32.0,
sha256 checked by the role) is built for the CPU backend on a Debian 13 amd64 container (GCC 14; vLLM's
x86_64 build demands GCC >= 12.3, Debian 12 has 12.2) through prepare.yml and build.yml, as a fleet would.

What this machine cannot reach is staged the way an offline fleet would stage it:
- oneDNN: vLLM's CMake clones tag v3.13 from GitHub unless FETCHCONTENT_SOURCE_DIR_ONEDNN names a tree
  (vllm_build_onednn_source_dir). The newest oneDNN source Debian's archive serves here is trixie's
  3.7.2+ds (sid lists 3.12.1+ds, but its .orig tarball answers 404 here); it is not the pinned release.
- torch 2.13.0+cpu: on PyTorch's index only. This kind of machine carries its cp311 x86_64 wheel in
  /opt/wheels, mounted into the container as python_venv's find-links; Debian 13's own Python is 3.13, so the
  container gets Python 3.11 from Debian 12 (apt source pinned low). Debian 12's python3.11-venv depends on
  python3-distutils, which only installs beside Debian 12's python3; an empty package providing
  python3.11-distutils stands in for it (setuptools carries its own distutils). Without that wheel, the
  role's default vllm_build_torch_index_url (PyTorch's index) must be reachable.
- triton-cpu: x86_64's requirements/cpu.txt pins it by a GitHub URL; vllm_build_requirement_overrides leaves
  it out of the build venv's installs and of the release.

The container runs `sleep infinity` (Debian 13's systemd cannot boot on cgroup v1; the build roles need no
service) and is kept between runs, so a re-run resumes (the role's CMake directory and ccache). Each
playbook's output and the build log go to .cache/reports/real-build/; the wall time of each step is printed.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import shutil
import subprocess
import tarfile
import sys
import time
import types
import urllib.request
from pathlib import Path

from harness.containers import playbook_command, podman
from harness.images import build_images, image_tag
from harness.machine import REPO_ROOT, log, require_root
from harness.prepared import HOST_CA_BUNDLE

CONTAINER = "arm-inference-real-build"
IMAGE = "debian13-amd64"
ONEDNN = {"name": "onednn_3.7.2+ds.orig.tar.xz", "version": "3.7.2",
          "url": "http://deb.debian.org/debian/pool/main/o/onednn/onednn_3.7.2+ds.orig.tar.xz",
          "sha256": "0cc51ca26c1af6a2bb1e71e378e7046f3ceb3e71791ee9d4e246d50f904a6ea6"}
ONEDNN_CACHE = Path("/var/cache/arm-inference/onednn")
ONEDNN_TREE = "/srv/onednn"
LOCAL_WHEELS = Path("/opt/wheels")
REPORTS = REPO_ROOT / ".cache" / "reports" / "real-build"
VLLM_ROOT = "/opt/vllm"

VARIABLES = {
    "python_venv_python_version": "3.11",
    "build_deps_python_version": "3.11",
    "python_venv_pip_ca_bundle": HOST_CA_BUNDLE,
    "vllm_build_method": "sdist",
    "vllm_build_sdist": "vllm==0.32.0",
    "vllm_build_onednn_source_dir": ONEDNN_TREE,
    "vllm_build_requirement_overrides": {"triton": ""},
    "vllm_build_max_jobs": 2,
    "vllm_build_timeout": 6 * 3600,
    "vllm_build_poll_interval": 60,
    "vllm_build_min_free_disk_gib": 10,
    "vllm_build_wheel_cache_dir": "",
    # vllm-0.32.0's version is 0.32.0+cpu when built for the CPU backend.
    "vllm_build_version_suffix": "+cpu",
}

# Debian 12's Python 3.11 on Debian 13, below trixie's own packages, and what stands in for python3-distutils.
CONTAINER_SETUP = r"""
set -e
cat > /etc/apt/sources.list.d/bookworm.sources <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
cat > /etc/apt/preferences.d/bookworm <<EOF
Package: *
Pin: release n=bookworm
Pin-Priority: 100
EOF
if ! dpkg -s python3.11-distutils-stub >/dev/null 2>&1; then
  mkdir -p /tmp/stub/DEBIAN
  cat > /tmp/stub/DEBIAN/control <<EOF
Package: python3.11-distutils-stub
Version: 3.11.2
Architecture: all
Maintainer: arm-inference rehearsal <root@localhost>
Provides: python3.11-distutils
Description: stands in for python3-distutils (Debian 12), which needs Debian 12 python3
EOF
  dpkg-deb --build /tmp/stub /tmp/python3.11-distutils-stub.deb >/dev/null
  dpkg -i /tmp/python3.11-distutils-stub.deb >/dev/null
fi
# As an operator would after adding a source: preflight reads the package lists, it never refreshes them.
apt-get update -qq
"""


def fetch_onednn():
    """The oneDNN tree, unpacked once on this machine (the container mounts it read-only)."""
    ONEDNN_CACHE.mkdir(parents=True, exist_ok=True)
    tree = ONEDNN_CACHE / ("onednn-" + ONEDNN["version"])
    if (tree / "CMakeLists.txt").exists():
        return tree
    path = ONEDNN_CACHE / ONEDNN["name"]
    if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != ONEDNN["sha256"]:
        log("downloading %s" % ONEDNN["url"])
        with urllib.request.urlopen(ONEDNN["url"], timeout=300) as answer:
            data = answer.read()
        if hashlib.sha256(data).hexdigest() != ONEDNN["sha256"]:
            sys.exit("harness: %s does not have the sha256 Debian's Sources index publishes" % ONEDNN["url"])
        path.write_bytes(data)
    unpacking = tree.with_name(tree.name + ".partial")
    shutil.rmtree(unpacking, ignore_errors=True)
    with tarfile.open(path) as archive:
        archive.extractall(unpacking, filter="data")
    top = list(unpacking.iterdir())
    (top[0] if len(top) == 1 and top[0].is_dir() else unpacking).rename(tree)
    shutil.rmtree(unpacking, ignore_errors=True)
    return tree


def start_container(onednn):
    alive = podman("exec", CONTAINER, "true", check=False).returncode == 0
    if alive:
        log("reusing container %s" % CONTAINER)
        return
    podman("rm", "-f", CONTAINER, check=False)
    volumes = ["-v", "%s:%s:ro" % (onednn, ONEDNN_TREE)]
    if LOCAL_WHEELS.is_dir():
        volumes += ["-v", "%s:%s:ro" % (LOCAL_WHEELS, LOCAL_WHEELS)]
    # vLLM's engine needs more than podman's default 64 MiB of /dev/shm (the serve check below).
    podman("run", "-d", "--name", CONTAINER, "--shm-size=1g", *volumes, image_tag(IMAGE), "sleep", "infinity")


def run_logged(name, playbook, variables):
    """One playbook against the container, its output in REPORTS/<name>.log; returns (rc, seconds)."""
    host = types.SimpleNamespace(name=CONTAINER)
    command, env = playbook_command([host], REPORTS, str(REPO_ROOT / "playbooks" / playbook), variables)
    env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks"
    started = time.monotonic()
    log("$ %s   (output: %s)" % (" ".join(command), REPORTS / ("%s.log" % name)))
    with open(REPORTS / ("%s.log" % name), "w") as output:
        code = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=REPORTS,
                              check=False).returncode
    return code, time.monotonic() - started


_STEP = re.compile(r"^==> (\S+)  (.*)$")


def build_steps(text):
    """(start, command) of each step vllm_build_run logged (its "==> <time>  <command>" lines)."""
    return [(datetime.datetime.fromisoformat(match.group(1)), match.group(2)) for match in map(_STEP.match, text.splitlines())
            if match]


def real_build(_args):
    require_root()
    build_images(types.SimpleNamespace(names=[IMAGE]))
    start_container(fetch_onednn())
    podman("exec", CONTAINER, "sh", "-c", CONTAINER_SETUP)
    REPORTS.mkdir(parents=True, exist_ok=True)
    variables = dict(VARIABLES)
    if (LOCAL_WHEELS / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").exists():
        variables.update(python_venv_pip_find_links=[str(LOCAL_WHEELS)], vllm_build_torch_index_url="")
    figures = {}
    for name, playbook in (("prepare", "prepare.yml"), ("build", "build.yml")):
        code, seconds = run_logged(name, playbook, variables)
        figures[name] = {"rc": code, "seconds": round(seconds)}
        log("%s.yml: rc %d in %.0f s" % (name, code, seconds))
        if code != 0:
            break
    logs = podman("exec", CONTAINER, "sh", "-c", "ls -t %s/builds/*/build.log 2>/dev/null | head -1" % VLLM_ROOT,
                  check=False).stdout.strip()
    if logs:
        text = podman("exec", CONTAINER, "cat", logs, check=False).stdout
        (REPORTS / "vllm-build.log").write_text(text)
        steps = build_steps(text)
        ends = [start for start, dummy in steps[1:]] + [None]
        figures["steps"] = [{"command": command[:160], "seconds": round((end - start).total_seconds()) if end else None}
                            for (start, command), end in zip(steps, ends)]
        figures["ninja"] = (re.findall(r"\[(\d+/\d+)\]", text) or [None])[-1]
    (REPORTS / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    if any(value.get("rc") for value in figures.values() if isinstance(value, dict)):
        sys.exit("harness: the rehearsal stopped; see %s" % REPORTS)
