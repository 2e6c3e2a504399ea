"""Containers for the container tests (tests/containers) and the benchmarks: throw-away podman containers
reached through their namespaces (namespaces.py), booted prepared hosts, and ansible-playbook runs against
them with the tests' variables."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

from harness.images import boot_container
from harness.machine import REPO_ROOT, native_arch
from harness.namespaces import CONNECTION, CONNECTION_PLUGINS, enter_command
from harness.prepared import FIXTURE_REPO, PREPARE_VARIABLES

NATIVE = native_arch()
# Where vllm_build's lifecycle and fleet compile. Natively they take about 4 minutes on this 2-core
# machine; emulated aarch64 (ARM_INFERENCE_BUILD_ARCH=arm64, `make build-arm64`) takes about 25.
BUILD_ARCH = os.environ.get("ARM_INFERENCE_BUILD_ARCH", NATIVE)

# Variables that let prepare.yml and build.yml run in a native test container: prepare.yml's (the
# machine's CA for PyPI, the compiler floor only warning), the fixture vLLM tree instead of
# GitHub's, no PyTorch index (unreachable here, and the fixture needs no torch).
BUILD_SETUP = dict(
    PREPARE_VARIABLES,
    vllm_build_git_repo=FIXTURE_REPO,
    vllm_build_torch_index_url="",
    vllm_build_min_free_disk_gib=1,
    vllm_build_poll_interval=2,
    # The fixture has vLLM's CPU platform code but no torch ops; its one kernel library must import.
    vllm_build_smoke_ops=[],
    vllm_build_smoke_modules=["vllm._C"],
    # Every host compiles; the fleet test turns the controller's wheel cache on.
    vllm_build_wheel_cache_dir="",
)


def podman(*args, check=True):
    return subprocess.run(["podman"] + list(args), capture_output=True, text=True, check=check)


class Container:
    """A throw-away container that tests and playbooks reach through its namespaces (namespaces.py)."""

    def __init__(self, image, systemd, options=()):
        self.name = "arm-inference-it-%s" % uuid.uuid4().hex[:8]
        command = ["/lib/systemd/systemd"] if systemd else ["sleep", "infinity"]
        options = (["--privileged", "--systemd=always"] if systemd else []) + list(options)
        podman("run", "-d", "--name", self.name, *options, image, *command)

    def exec(self, command):
        return subprocess.run(enter_command(self.name, ["sh", "-c", command]), capture_output=True, text=True,
                              check=False)

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
    inventory variables (which may name another connection than the namespaces', e.g. SSH). A path ending in .yml
    runs that playbook."""
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"vllm_hosts": {"hosts": {host.name: dict(
        {"ansible_connection": CONNECTION, "ansible_python_interpreter": "/usr/bin/python3"},
        **(host_vars or {}).get(host.name, {}))
        for host in hosts}}}))
    if role.endswith(".yml"):
        playbook = Path(role)
    else:
        playbook = tmp_path / "play.yml"
        playbook.write_text(
            json.dumps([{"name": "Run %s" % role, "hosts": "all", "become": True, "roles": [{"role": role}]}])
        )
    extra = tmp_path / "extra.json"
    # Root-only: tests pass keys and passwords here.
    extra.touch(mode=0o600)
    extra.write_text(json.dumps(variables))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections_path or REPO_ROOT / ".cache" / "collections")
    env["ANSIBLE_CONNECTION_PLUGINS"] = CONNECTION_PLUGINS
    return ["ansible-playbook", "-i", str(inventory), str(playbook), "-e", "@%s" % extra, *options], env


def run_playbook(hosts, tmp_path, role, variables, collections_path=None, options=(), host_vars=None):
    command, env = playbook_command(hosts, tmp_path, role, variables, collections_path, options, host_vars)
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)


def boot(container):
    """Wait for systemd in the container, and share mounts as systemd expects (credentials)."""
    boot_container(container.name)


def prepared_host(image, options=()):
    """A booted container from `prepared_image`: a host that prepare.yml has prepared."""
    container = Container(image, systemd=True, options=options)
    try:
        boot(container)
    except BaseException:
        container.remove()
        raise
    return container
