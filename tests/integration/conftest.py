"""Shared helpers for integration tests: native containers and ansible-playbook runs against them.

These tests run on the machine's native architecture (fast), from images built by
tests/harness/harness.py, and need root (rootful podman), like the rest of `make test`.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
NATIVE = {"x86_64": "amd64", "aarch64": "arm64"}[os.uname().machine]


def podman(*args, check=True):
    return subprocess.run(["podman"] + list(args), capture_output=True, text=True, check=check)


class Container:
    """A throw-away container reachable through Ansible's podman connection."""

    def __init__(self, image, systemd, options=()):
        self.name = "arm-inference-it-%s" % uuid.uuid4().hex[:8]
        command = ["/lib/systemd/systemd"] if systemd else ["sleep", "infinity"]
        options = (["--privileged", "--systemd=always"] if systemd else []) + list(options)
        podman("run", "-d", "--name", self.name, *options, image, *command)

    def exec(self, command):
        return podman("exec", self.name, "sh", "-c", command, check=False)

    def state(self):
        """What a role must not touch when it fails in preflight: packages, users, its directories."""
        probe = (
            "dpkg-query -W -f '${Package} ${Version}\\n' | sha256sum; getent passwd vllm; getent group vllm; "
            "getent passwd vllm-serve; ls -d /opt/vllm /var/lib/vllm /etc/vllm-serve /usr/local/libexec/arm-inference "
            "/etc/systemd/system/vllm-serve-* 2>/dev/null; true"
        )
        return self.exec(probe).stdout

    def playbook(self, tmp_path, role, variables, collections_path=None, options=()):
        """Run `role` (or a playbook path ending in .yml) against this container; return the process."""
        return run_playbook([self], tmp_path, role, variables, collections_path, options)

    def remove(self):
        podman("rm", "-f", "-t", "0", self.name, check=False)


def playbook_command(hosts, tmp_path, role, variables, collections_path=None, options=(), host_vars=None):
    """The ansible-playbook command and environment that run `role` with extra vars `variables` (JSON
    keeps their types) against `hosts` in group vllm_hosts, each with its `host_vars[name]` as
    inventory variables. A path ending in .yml runs that playbook."""
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"vllm_hosts": {"hosts": {host.name: dict(
        (host_vars or {}).get(host.name, {}),
        ansible_connection="containers.podman.podman", ansible_python_interpreter="/usr/bin/python3")
        for host in hosts}}}))
    if role.endswith(".yml"):
        playbook = Path(role)
    else:
        playbook = tmp_path / "play.yml"
        playbook.write_text(
            json.dumps([{"name": "Run %s" % role, "hosts": "all", "become": True, "roles": [{"role": role}]}])
        )
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps(variables))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections_path or REPO_ROOT / ".cache" / "collections")
    return ["ansible-playbook", "-i", str(inventory), str(playbook), "-e", "@%s" % extra, *options], env


def run_playbook(hosts, tmp_path, role, variables, collections_path=None, options=(), host_vars=None):
    command, env = playbook_command(hosts, tmp_path, role, variables, collections_path, options, host_vars)
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)


@pytest.fixture(scope="module")
def supported_host():
    container = Container("localhost/arm-inference/debian12-%s:latest" % NATIVE, systemd=True)
    yield container
    container.remove()


@pytest.fixture(scope="module")
def unsupported_host():
    container = Container("localhost/arm-inference/debian-testing-%s:latest" % NATIVE, systemd=False)
    yield container
    container.remove()


FIXTURE_REPO = "/srv/vllm-fixture.git"
# Variables that let prepare.yml and build.yml run in a native test container: the machine's CA for
# PyPI (see README, "Test machine"), the fixture vLLM tree instead of GitHub's, no PyTorch index
# (unreachable here, and the fixture needs no torch). Debian 12's GCC 12.2 is below the floor vLLM's
# x86_64 backend demands; the fixture compiles with it, so the floor only warns.
BUILD_SETUP = {
    "build_deps_compiler_floor_policy": "warn",
    "python_venv_pip_ca_bundle": "/etc/ssl/certs/ca-certificates.crt",
    "python_venv_packages": "{{ build_deps_toolchain.venv_requirements | default([]) }}",
    "vllm_build_git_repo": FIXTURE_REPO,
    "vllm_build_torch_index_url": "",
    "vllm_build_min_free_disk_gib": 1,
    "vllm_build_poll_interval": 2,
    # Every host compiles; the fleet test turns the controller's wheel cache on.
    "vllm_build_wheel_cache_dir": "",
}


def boot(container):
    """Wait for systemd in the container, and share mounts as systemd expects (credentials)."""
    import time

    for dummy in range(60):
        if container.exec("systemctl is-system-running").stdout.strip() in ("running", "degraded"):
            break
        time.sleep(1)
    assert container.exec("mount --make-rshared /").returncode == 0


def stage_fixture_repo(container, tmp_path):
    """Put the fixture vLLM repository (tests/fixtures/make_vllm_source_repo.py) into the container."""
    repo = tmp_path / "vllm-fixture.git"
    subprocess.run(["python3", str(REPO_ROOT / "tests" / "fixtures" / "make_vllm_source_repo.py"), "--force",
                    str(repo)], check=True, capture_output=True, text=True)
    podman("cp", str(repo), "%s:%s" % (container.name, FIXTURE_REPO))
    # Root owns the copy and the build user clones it: declare it safe, as for a shared mirror.
    assert container.exec("printf '[safe]\\n    directory = %s\\n' > /etc/gitconfig" % FIXTURE_REPO).returncode == 0


@pytest.fixture(scope="session")
def prepared_image(tmp_path_factory):
    """This machine's Debian 12 after prepare.yml (BUILD_SETUP) with the fixture vLLM repository
    staged, committed once per test session. The build and serve tests start from what prepare.yml
    leaves on a host instead of each re-running apt; prepare.yml itself still runs for real, here,
    every session."""
    tag = "localhost/arm-inference/debian12-%s-prepared:it-%s" % (NATIVE, uuid.uuid4().hex[:8])
    container = Container("localhost/arm-inference/debian12-%s:latest" % NATIVE, systemd=True)
    try:
        boot(container)
        stage_fixture_repo(container, tmp_path_factory.mktemp("fixture"))
        result = container.playbook(tmp_path_factory.mktemp("prepare"), str(REPO_ROOT / "playbooks" / "prepare.yml"),
                                    BUILD_SETUP)
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        # Stopped, so systemd has shut down cleanly; an empty machine-id lets each container get its own.
        assert container.exec(": > /etc/machine-id").returncode == 0
        podman("stop", "-t", "30", container.name)
        podman("commit", "--quiet", container.name, tag)
    finally:
        container.remove()
    yield tag
    podman("rmi", "-f", tag, check=False)


def prepared_host(image, options=()):
    """A booted container from `prepared_image`: a host that prepare.yml has prepared."""
    container = Container(image, systemd=True, options=options)
    try:
        boot(container)
    except BaseException:
        container.remove()
        raise
    return container
