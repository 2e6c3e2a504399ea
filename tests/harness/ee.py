"""The execution environment (execution-environment.yml, docs/execution-environment.md), built and run here: `make ee`
(`python3 tests/harness ee`), outside CI.

1. The tools: ansible-builder and ansible-navigator (requirements-ee-tools.txt) into .venv.
2. The collection tarballs ee/requirements.yml names, under build/ee-collections: this collection
   (`ansible-galaxy collection build`) and those of requirements.yml, packed from the pinned ansible bundle's
   installed copies in .venv (Galaxy is unreachable here; an installed copy holds Galaxy's MANIFEST.json and
   FILES.json, and ansible-galaxy installs a tarball of exactly the files FILES.json lists, checking each digest).
3. The base image (ee/base/Containerfile) from the harness's Debian 12 image, rebuilt when its recipe changes.
4. The execution environment with ansible-builder and podman.
5. One SSH host: a container from the prepared image, its SSH port published on 127.0.0.1, set up by
   tests/playbooks/ssh_host.yml (the engine scenario's login user `admin`, key only, sudo with a password and
   requiretty), then `ansible-navigator run` of the collection's preflight (and site.yml with --site) inside the image,
   pipelining off, the sudo password handed in as an extra-vars file as AWX injects a credential.

pip inside a build reaches PyPI through this machine's TLS-intercepting CA: a pip.conf naming a copy of the host's
CA bundle is mounted into every build step (/etc/xdg/pip, pip's site configuration), never written into an image.
Figures (build times, image size, the navigator runs) go to .cache/reports/ee.json.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

from harness.containers import prepared_host
from harness.images import image_label, image_tag, podman_output
from harness.machine import CACHE_DIR, REPO_ROOT, VENV_DIR, link_collection, log, native_arch, require_root, run
from harness.prepared import HOST_CA_BUNDLE, build_prepared_image

BASE_TAG = image_tag("ee-base")
EE_TAG = image_tag("ee")
BASE_LABEL = "org.arm-inference.ee-base"
BASE_DIR = REPO_ROOT / "ee" / "base"
COLLECTIONS_DIR = REPO_ROOT / "build" / "ee-collections"
WORK_DIR = CACHE_DIR / "ee"
REPORT = CACHE_DIR / "reports" / "ee.json"
BUNDLE = VENV_DIR / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages" / "ansible_collections"
# Where pip's site configuration is read in Debian's Python (XDG_CONFIG_DIRS' default): mounted into build steps.
PIP_SITE_DIR = "/etc/xdg/pip"


def install_tools():
    run([VENV_DIR / "bin" / "pip", "install", "-q", "-r", REPO_ROOT / "requirements-ee-tools.txt"])


def pack_installed_collection(source, output_dir):
    """A collection artifact from an installed copy, named as Galaxy names it: every file its FILES.json lists
    that the copy still has (the ansible bundle drops tests/ and a few others), with FILES.json and MANIFEST.json
    rewritten to list just those, so that ansible-galaxy's digest checks hold. Returns the tarball's path."""
    manifest = json.loads((source / "MANIFEST.json").read_text())
    files = json.loads((source / "FILES.json").read_text())
    files["files"] = [entry for entry in files["files"] if entry["name"] == "." or (source / entry["name"]).exists()]
    files_json = json.dumps(files, indent=4).encode()
    manifest["file_manifest_file"]["chksum_sha256"] = hashlib.sha256(files_json).hexdigest()
    info = manifest["collection_info"]
    tarball = output_dir / ("%s-%s-%s.tar.gz" % (info["namespace"], info["name"], info["version"]))
    with tarfile.open(tarball, "w:gz") as archive:
        for name, data in (("MANIFEST.json", json.dumps(manifest, indent=4).encode()), ("FILES.json", files_json)):
            member = tarfile.TarInfo(name)
            member.size, member.mode, member.mtime = len(data), 0o644, int(time.time())
            archive.addfile(member, io.BytesIO(data))
        for entry in files["files"]:
            if entry["name"] != ".":
                archive.add(source / entry["name"], arcname=entry["name"], recursive=False)
    return tarball


def pack_requirements(output_dir):
    """The tarballs of requirements.yml's collections in output_dir, packed from the bundle's copies, which must be
    at requirements.yml's pins."""
    for entry in yaml.safe_load((REPO_ROOT / "requirements.yml").read_text())["collections"]:
        source = BUNDLE.joinpath(*entry["name"].split("."))
        version = json.loads((source / "MANIFEST.json").read_text())["collection_info"]["version"]
        if version != entry["version"]:
            sys.exit("harness: the ansible bundle in .venv carries %s %s, requirements.yml pins %s; run `make setup`"
                     % (entry["name"], version, entry["version"]))
        pack_installed_collection(source, output_dir)


def build_collections():
    """The tarballs ee/requirements.yml names: this collection, built, and requirements.yml's (pack_requirements)."""
    shutil.rmtree(COLLECTIONS_DIR, ignore_errors=True)
    COLLECTIONS_DIR.mkdir(parents=True)
    run(["ansible-galaxy", "collection", "build", "--force", "--output-path", COLLECTIONS_DIR, REPO_ROOT],
        stdout=subprocess.DEVNULL)
    pack_requirements(COLLECTIONS_DIR)
    wanted = sorted(Path(item["name"]).name for item in
                    yaml.safe_load((REPO_ROOT / "ee" / "requirements.yml").read_text())["collections"])
    made = sorted(path.name for path in COLLECTIONS_DIR.glob("*.tar.gz"))
    if made != wanted:
        sys.exit("harness: ee/requirements.yml names %s, the build made %s" % (wanted, made))


def pip_site_config(workdir):
    """A directory for PIP_SITE_DIR: a pip.conf naming a copy of this machine's CA bundle."""
    site = Path(workdir) / "pip"
    site.mkdir()
    shutil.copy(HOST_CA_BUNDLE, site / "host-ca.crt")
    (site / "pip.conf").write_text("[global]\ncert = %s/host-ca.crt\n" % PIP_SITE_DIR)
    return ["--volume", "%s:%s:ro" % (site, PIP_SITE_DIR)]


def base_digest(debian_image_id):
    digest = hashlib.sha256(debian_image_id.encode())
    for path in sorted(BASE_DIR.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def build_base(mounts):
    """The base image, unless its label holds the digest of its recipe and Debian image; seconds spent."""
    debian = image_tag("debian12-%s" % native_arch())
    digest = base_digest(podman_output("image", "inspect", "--format", "{{.Id}}", debian))
    if image_label(BASE_TAG, BASE_LABEL) == digest:
        log("%s is current (recipe %s)" % (BASE_TAG, digest))
        return 0.0
    started = time.monotonic()
    run(["podman", "build", "--quiet", *mounts, "--build-arg", "DEBIAN_IMAGE=%s" % debian,
         "--label", "%s=%s" % (BASE_LABEL, digest), "--tag", BASE_TAG, "--file", BASE_DIR / "Containerfile", BASE_DIR],
        stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def build_ee(mounts):
    started = time.monotonic()
    run([VENV_DIR / "bin" / "ansible-builder", "build", "--file", REPO_ROOT / "execution-environment.yml",
         "--context", WORK_DIR / "context", "--container-runtime", "podman", "--tag", EE_TAG, "--verbosity", "2",
         "--extra-build-cli-args", " ".join(mounts)], cwd=REPO_ROOT)
    return time.monotonic() - started


def image_size(tag):
    return int(podman_output("image", "inspect", "--format", "{{.Size}}", tag))


def ssh_container(image):
    """A booted container from `image` with its SSH port published on 127.0.0.1 (the local target's wheelhouse
    mounted, vLLM's shared memory); returns the container and the port."""
    host = prepared_host(image, options=[
        "--publish", "127.0.0.1::22", "--shm-size=1g",
        "--volume", "/var/cache/arm-inference/wheelhouse:/wheelhouse:ro"])
    return host, int(podman_output("port", host.name, "22/tcp").rsplit(":", 1)[1])


def ssh_host_vars(port, key):
    """Inventory variables that reach an SSH host of ssh_host.yml: 127.0.0.1:port as `admin` with key `key`. The
    container is new each time, with new host keys, and reachable from this machine only: no known_hosts."""
    return {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": port, "ansible_user": "admin",
            "ansible_ssh_private_key_file": str(key),
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
            "ansible_python_interpreter": "/usr/bin/python3"}


def ssh_host(workdir, password, key=None, requiretty=True, image=None):
    """A booted container from `image` (default the prepared image), its SSH port on 127.0.0.1, set up by
    ssh_host.yml (the controller's key at `key`, default workdir/project/id_ed25519); returns the container and
    the port."""
    host, port = ssh_container(image or build_prepared_image())
    key = key or workdir / "project" / "id_ed25519"
    key.parent.mkdir(parents=True, exist_ok=True)
    setup = host.playbook(workdir, str(REPO_ROOT / "tests" / "playbooks" / "ssh_host.yml"), {
        "ansible_become_password": password, "ssh_host_require_no_acl": False, "ssh_host_requiretty": requiretty,
        "ssh_host_key": str(key)})
    if setup.returncode != 0:
        host.remove()
        sys.exit("harness: ssh_host.yml failed on %s:\n%s" % (host.name, (setup.stdout + setup.stderr)[-3000:]))
    return host, port


def navigator_project(workdir, port, password):
    """What a job template gets in AWX: an inventory (the SSH host, the local target's variables), an ansible.cfg
    without pipelining, and the sudo password as an extra-vars file (AWX: a machine credential)."""
    project = workdir / "project"
    # The project directory is what ansible-navigator mounts into the container: the key lives in it.
    shutil.copytree(REPO_ROOT / "inventories" / "local" / "group_vars", project / "inventory" / "group_vars")
    (project / "inventory" / "hosts.yml").write_text(yaml.safe_dump({"vllm_hosts": {"hosts": {
        "ee-ssh-host": ssh_host_vars(port, workdir / "project" / "id_ed25519")}}}))
    (project / "ansible.cfg").write_text("[defaults]\nforks = 8\n[ssh_connection]\npipelining = False\n")
    secrets_file = project / "credentials.yml"
    secrets_file.write_text(yaml.safe_dump({"ansible_become_password": password}))
    secrets_file.chmod(0o600)
    return project


def ensure_mqueue():
    """ansible-navigator refuses to start without /dev/mqueue (POSIX message queues, which its process handling
    uses); this machine's /dev has none. A change to the machine: made once, idempotently, as setup-host does."""
    mqueue = Path("/dev/mqueue")
    if not mqueue.is_dir():
        mqueue.mkdir()
        subprocess.run(["mount", "-t", "mqueue", "mqueue", str(mqueue)], check=False)


def navigator_run(project, playbook, name):
    """`ansible-navigator run` of a playbook of the collection installed in the image (by FQCN) against the SSH
    host; returns (exit code, seconds, log path). The container shares the host's network: the SSH port is
    published on 127.0.0.1 only."""
    log_file = WORK_DIR / ("navigator-%s.log" % name)
    # The checkout's own settings stay out: the image's collection, not the checkout's link, must run.
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    command = [VENV_DIR / "bin" / "ansible-navigator", "run", playbook, "--inventory", project / "inventory",
               "--extra-vars", "@%s" % (project / "credentials.yml"),
               "--execution-environment", "true", "--container-engine", "podman", "--execution-environment-image",
               EE_TAG, "--pull-policy", "never", "--mode", "stdout", "--playbook-artifact-enable", "false",
               "--container-options=--network=host",
               "--execution-environment-volume-mounts",
               "/var/cache/arm-inference/models:/var/cache/arm-inference/models",
               "--log-file", WORK_DIR / ("navigator-%s-debug.log" % name)]
    started = time.monotonic()
    with open(log_file, "w", encoding="utf-8") as output:
        log("$ " + " ".join(str(part) for part in command) + "  > %s" % log_file)
        result = subprocess.run([str(part) for part in command], stdout=output, stderr=subprocess.STDOUT, cwd=project,
                                env=env, check=False)
    elapsed = time.monotonic() - started
    log("%s: exit %d in %.0f s; last lines:\n%s" % (name, result.returncode, elapsed,
                                                    "\n".join(log_file.read_text().splitlines()[-8:])))
    return result.returncode, elapsed, log_file


def ee(args):
    """`tests/harness ee`: build the base image and the execution environment, then run preflight (and site.yml
    with --site) through ansible-navigator against one SSH host."""
    require_root()
    link_collection(None)
    shutil.rmtree(WORK_DIR, ignore_errors=True)
    WORK_DIR.mkdir(parents=True)
    figures = {"machine": os.uname().machine}
    install_tools()
    build_collections()
    with tempfile.TemporaryDirectory(prefix="arm-inference-ee-", dir="/var/tmp") as workdir:
        mounts = pip_site_config(workdir)
        figures["base_build_s"] = round(build_base(mounts))
        figures["ee_build_s"] = round(build_ee(mounts))
    figures["base_size_bytes"] = image_size(BASE_TAG)
    figures["ee_size_bytes"] = image_size(EE_TAG)
    ensure_mqueue()
    password = secrets.token_urlsafe(16)
    host, port = ssh_host(WORK_DIR, password)
    try:
        project = navigator_project(WORK_DIR, port, password)
        playbooks = ["preflight"] + (["site"] if args.site else [])
        for name in playbooks:
            code, elapsed, log_file = navigator_run(project, "arm_inference.vllm.%s" % name, name)
            figures["navigator_%s" % name] = {"exit": code, "seconds": round(elapsed), "log": str(log_file)}
            if code != 0:
                break
    finally:
        if args.keep:
            log("kept the SSH host %s (127.0.0.1:%d); remove it with podman rm -f %s" % (host.name, port, host.name))
        else:
            host.remove()
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(figures, indent=2) + "\n")
    log("figures in %s:\n%s" % (REPORT, json.dumps(figures, indent=2)))
    failed = [name for name, value in figures.items() if isinstance(value, dict) and value["exit"] != 0]
    if failed:
        sys.exit("harness: ansible-navigator failed: %s (logs in %s)" % (", ".join(failed), WORK_DIR))
