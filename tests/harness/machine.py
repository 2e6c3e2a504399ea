"""This machine: the Debian packages, binfmt and podman settings the tests need, the .venv with the pinned
toolchain, the collection linked under .cache/collections, and the small helpers the other modules share
(log, run, require_root, native_arch)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".cache"
VENV_DIR = REPO_ROOT / ".venv"
APT_PACKAGES = [
    "podman",
    "runc",
    "qemu-user-static",
    "binfmt-support",
    "debootstrap",
    "debian-archive-keyring",
    "python3",
    "python3-venv",
    "python3-pip",
    "git",
    "make",
    "curl",
    "ca-certificates",
    # The gateway's tests run Debian's own HAProxy (2.6 on bookworm, what the hosts run) on this machine
    # (tests/unit/roles/test_gateway_haproxy.py); openssl makes their certificate.
    "haproxy",
    "openssl",
]

# Podman settings this kernel needs (see CONTRIBUTING.md, "Test machine"): crun refuses the
# cgroup v1 hybrid layout, and without CAP_SYS_RESOURCE podman's default rlimits cannot be applied.
CONTAINERS_CONF = Path("/etc/containers/containers.conf.d/50-arm-inference-harness.conf")
CONTAINERS_CONF_TEXT = """\
# Written by arm_inference.vllm tests/harness setup-host.
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]

[engine]
runtime = "runc"
"""


def log(message):
    print("[harness] %s" % message, flush=True)


def run(cmd, **kwargs):
    log("$ " + " ".join(str(part) for part in cmd))
    return subprocess.run([str(part) for part in cmd], check=True, **kwargs)


def require_root():
    if os.geteuid() != 0:
        sys.exit("harness: this step changes the machine (apt, binfmt, rootful podman); run it as root or with sudo")


def native_arch():
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)


def host_codename():
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    return ""


def debian_mirror():
    """The Debian mirror this machine's own apt sources use (never a hard-coded one)."""
    override = os.environ.get("HARNESS_DEBIAN_MIRROR")
    if override:
        return override
    codename = host_codename()
    sources = [Path("/etc/apt/sources.list")] + sorted(Path("/etc/apt/sources.list.d").glob("*"))
    for source in sources:
        if not source.is_file():
            continue
        mirror = mirror_from_sources(source.read_text(), codename)
        if mirror:
            return mirror
    sys.exit("harness: no Debian mirror for suite %r found in /etc/apt/sources*; set HARNESS_DEBIAN_MIRROR" % codename)


def mirror_from_sources(text, codename):
    """Find the URI serving `codename` (not -security/-updates) in one-line or deb822 apt sources."""
    for line in text.splitlines():
        match = re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s", line.strip() + " ")
        if match and match.group(2) == codename:
            return match.group(1)
    for stanza in re.split(r"\n\s*\n", text):
        fields = {}
        for line in stanza.splitlines():
            if ":" in line and not line.startswith("#"):
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.split()
        if codename in fields.get("suites", []) and "deb" in fields.get("types", []) and fields.get("uris"):
            return fields["uris"][0]
    return None


def ensure_binfmt():
    """Register qemu-aarch64 (again: a container's systemd-binfmt can flush it, see build_image)."""
    binfmt = Path("/proc/sys/fs/binfmt_misc")
    if not (binfmt / "register").exists():
        run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(binfmt)])
    entry = binfmt / "qemu-aarch64"
    if not entry.exists() or "enabled" not in entry.read_text():
        run(["update-binfmts", "--enable", "qemu-aarch64"])
    flags = [line for line in entry.read_text().splitlines() if line.startswith("flags:")]
    if not flags or "F" not in flags[0]:
        sys.exit("harness: qemu-aarch64 binfmt entry lacks the F (fix-binary) flag; aarch64 containers cannot run")


def setup_host(_args):
    require_root()
    missing = [pkg for pkg in APT_PACKAGES if subprocess.run(["dpkg", "-s", pkg], capture_output=True, check=False).returncode != 0]
    if missing:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        run(["apt-get", "update", "-qq"], env=env)
        run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing, env=env)
    else:
        log("apt packages already installed")
    ensure_binfmt()
    if not CONTAINERS_CONF.exists() or CONTAINERS_CONF.read_text() != CONTAINERS_CONF_TEXT:
        CONTAINERS_CONF.parent.mkdir(parents=True, exist_ok=True)
        CONTAINERS_CONF.write_text(CONTAINERS_CONF_TEXT)
        log("wrote %s" % CONTAINERS_CONF)
    runtime = subprocess.run(
        ["podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if runtime != "runc":
        sys.exit("harness: podman uses %r; this machine needs runc (see %s)" % (runtime, CONTAINERS_CONF))
    log("host ready: podman runtime runc, qemu-aarch64 binfmt enabled")


def setup_venv(_args):
    requirements = REPO_ROOT / "requirements-dev.txt"
    stamp = VENV_DIR / ".requirements.sha256"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        log(".venv is current")
        return
    if not (VENV_DIR / "bin" / "python").exists():
        run([sys.executable, "-m", "venv", VENV_DIR])
    run([VENV_DIR / "bin" / "pip", "install", "-q", "-r", requirements])
    stamp.write_text(digest)


# The Makefile points ANSIBLE_HOME here so that no tool reads the user's ~/.ansible. ansible-lint
# and molecule's prerun treat ANSIBLE_HOME/collections as their cache and search it before
# ANSIBLE_COLLECTIONS_PATH: a copy of this collection left there by an older checkout (molecule's
# prerun, now off, wrote one) would be linted and run instead of the checkout (stop 12's red CI:
# a module added since was "couldn't resolve").
def ansible_home():
    return Path(os.environ.get("ANSIBLE_HOME") or CACHE_DIR / "ansible-home")


def shadowing_copies(roots=None):
    found = []
    for root in [ansible_home() / "collections"] if roots is None else roots:
        candidate = Path(root) / "ansible_collections" / "arm_inference" / "vllm"
        if (candidate.exists() or candidate.is_symlink()) and candidate.resolve() != REPO_ROOT:
            found.append(candidate)
    return found


def link_collection(_args):
    for stale in shadowing_copies():
        log("removing %s: a stale copy of this collection in the tools' cache would shadow the checkout" % stale)
        if stale.is_symlink() or stale.is_file():
            stale.unlink()
        else:
            shutil.rmtree(stale)
    namespace = CACHE_DIR / "collections" / "ansible_collections" / "arm_inference"
    namespace.mkdir(parents=True, exist_ok=True)
    link = namespace / "vllm"
    if link.is_symlink() and link.resolve() == REPO_ROOT:
        return
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(REPO_ROOT)
    log("linked %s -> %s" % (link, REPO_ROOT))
