"""The prepared image: Debian 12 of an architecture after playbooks/prepare.yml, with the fixture vLLM
repository staged, which the build and serve tests and the rolling_update scenario start from instead of
each re-running apt. Its label holds a digest of everything that shapes it."""

from __future__ import annotations

import concurrent.futures
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from harness.machine import CACHE_DIR, REPO_ROOT, link_collection, log, native_arch, run
from harness.images import IMAGES, boot_container, image_label, image_tag, podman_output
from harness.namespaces import CONNECTION, CONNECTION_PLUGINS


# The prepared image: a Debian 12 image (per architecture) after playbooks/prepare.yml, with the fixture vLLM
# repository (tests/fixtures/make_vllm_source_repo.py) staged where vllm_build_git_repo points in the
# tests. Its label holds a digest of everything that shapes it; an unchanged digest means no work.
PREPARED_LABEL = "org.arm-inference.prepared"
PREPARED_BUILDER_VERSION = 1
PREPARED_BASE = "debian12"
FIXTURE_REPO = "/srv/vllm-fixture.git"
FIXTURE_SCRIPT = REPO_ROOT / "tests" / "fixtures" / "make_vllm_source_repo.py"
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"

# Variables that let prepare.yml run in a native test container: the machine's CA for PyPI (see
# CONTRIBUTING.md, "Test machine"); prepare.yml itself hands the venv the build tools build_deps publishes. Debian 12's
# GCC 12.2 is below the floor vLLM's x86_64 backend demands; the fixture compiles with it, so the
# floor only warns.
PREPARE_VARIABLES = {
    "build_deps_compiler_floor_policy": "warn",
    "python_venv_pip_ca_bundle": HOST_CA_BUNDLE,
}

# What prepare.yml runs (its roles and the collection's plugins and metadata they use) and what is
# staged; the base image id, the variables and the host's CA bundle join them in the digest.
PREPARED_INPUTS = ["playbooks/prepare.yml", "roles/build_deps", "roles/tcmalloc", "roles/python_venv", "plugins", "meta",
                   "galaxy.yml", "tests/fixtures"]

# One build of an architecture's image at a time on this machine, whoever asks (the Makefile, each
# pytest-xdist worker).
PREPARED_LOCK = "/var/tmp/arm-inference-prepared-image-%s.lock"


def prepared_image_tag(arch=None):
    return image_tag("%s-%s-prepared" % (PREPARED_BASE, arch or native_arch()))


def prepared_inputs_digest(base_image_id):
    """sha256 over the prepared image's inputs: files (by path and content), variables, CA bundle, base image."""
    digest = hashlib.sha256()
    for name in PREPARED_INPUTS:
        path = REPO_ROOT / name
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for item in files:
            if item.is_file() and "__pycache__" not in item.parts:
                digest.update(str(item.relative_to(REPO_ROOT)).encode() + b"\0" + item.read_bytes() + b"\0")
    digest.update(json.dumps(PREPARE_VARIABLES, sort_keys=True).encode())
    digest.update(Path(HOST_CA_BUNDLE).read_bytes() if Path(HOST_CA_BUNDLE).exists() else b"")
    digest.update(("%s %d" % (base_image_id, PREPARED_BUILDER_VERSION)).encode())
    return digest.hexdigest()[:16]


def stage_fixture_repo(name, workdir):
    """Put the fixture vLLM repository into the container where the tests' vllm_build_git_repo points."""
    repo = Path(workdir) / "vllm-fixture.git"
    run([sys.executable, FIXTURE_SCRIPT, "--force", repo], stdout=subprocess.DEVNULL)
    run(["podman", "cp", repo, "%s:%s" % (name, FIXTURE_REPO)])
    # Root owns the copy and the build user clones it: declare it safe, as for a shared mirror.
    run(["podman", "exec", name, "sh", "-c", "printf '[safe]\\n    directory = %s\\n' > /etc/gitconfig" % FIXTURE_REPO])


def run_prepare_playbook(name, workdir):
    inventory = Path(workdir) / "inventory.json"
    inventory.write_text(json.dumps({"vllm_hosts": {"hosts": {name: {
        "ansible_connection": CONNECTION, "ansible_python_interpreter": "/usr/bin/python3"}}}}))
    variables = Path(workdir) / "prepare-variables.json"
    variables.write_text(json.dumps(PREPARE_VARIABLES))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(CACHE_DIR / "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONNECTION_PLUGINS=CONNECTION_PLUGINS)
    run(["ansible-playbook", "-i", inventory, REPO_ROOT / "playbooks" / "prepare.yml", "-e", "@%s" % variables],
        env=env, cwd=workdir)


def build_prepared_images(args):
    """The prepared image of each architecture asked for (default: this machine's), side by side."""
    arches = list(dict.fromkeys(args.arches or [native_arch()]))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(build_prepared_image, arches))


def build_prepared_image(arch=None):
    """Build the prepared image of `arch` (default: this machine's) unless its label already holds the
    digest of its inputs; return its tag. Another architecture runs under qemu-user emulation."""
    arch = arch or native_arch()
    if "%s-%s" % (PREPARED_BASE, arch) not in IMAGES:
        sys.exit("harness: no %s image for architecture %r (known: amd64, arm64)" % (PREPARED_BASE, arch))
    tag = prepared_image_tag(arch)
    base = image_tag("%s-%s" % (PREPARED_BASE, arch))
    with open(PREPARED_LOCK % arch, "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        digest = prepared_inputs_digest(podman_output("image", "inspect", "--format", "{{.Id}}", base))
        if image_label(tag, PREPARED_LABEL) == digest:
            log("%s is current (inputs %s)" % (tag, digest))
            return tag
        link_collection(None)
        started = time.monotonic()
        name = "arm-inference-prepare-%s" % uuid.uuid4().hex[:8]
        previous = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True,
                                  check=False).stdout.strip()
        workdir = Path(tempfile.mkdtemp(prefix="arm-inference-prepare-", dir="/var/tmp"))
        try:
            run(["podman", "run", "-d", "--name", name, "--privileged", "--systemd=always", base, "/lib/systemd/systemd"],
                stdout=subprocess.DEVNULL)
            boot_container(name)
            stage_fixture_repo(name, workdir)
            run_prepare_playbook(name, workdir)
            # An empty machine-id lets each container started from the image get its own; stopped
            # first, so systemd has shut down cleanly.
            run(["podman", "exec", name, "sh", "-c", ": > /etc/machine-id"])
            run(["podman", "stop", "-t", "30", name], stdout=subprocess.DEVNULL)
            run(["podman", "commit", "--quiet", "--change", "LABEL %s=%s" % (PREPARED_LABEL, digest), name, tag],
                stdout=subprocess.DEVNULL)
        finally:
            subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, check=False)
            shutil.rmtree(workdir, ignore_errors=True)
        if previous:
            # The outdated image, unless a container still runs from it.
            subprocess.run(["podman", "rmi", previous], capture_output=True, check=False)
        log("built %s in %.0f s (inputs %s)" % (tag, time.monotonic() - started, digest))
        return tag
