"""Shared helpers for integration tests: native containers and ansible-playbook runs against them.

These tests run on the machine's native architecture (fast), from images built by
tests/harness/harness.py, and need root (rootful podman), like the rest of `make test`. vllm_build's
lifecycle and fleet tests compile on BUILD_ARCH: the machine's own by default (what they prove does not
depend on the architecture); `make build-arm64` runs them on aarch64, emulated on an x86_64 machine.
The aarch64 compile itself is proven in CI by the molecule `site` scenario.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
NATIVE = {"x86_64": "amd64", "aarch64": "arm64"}[os.uname().machine]
# Where vllm_build's lifecycle and fleet compile. Natively they take about 4 minutes on this 2-core
# machine; emulated aarch64 (ARM_INFERENCE_BUILD_ARCH=arm64, `make build-arm64`) takes about 25.
BUILD_ARCH = os.environ.get("ARM_INFERENCE_BUILD_ARCH", NATIVE)


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


# The harness builds the prepared image (tests/harness/harness.py prepared-image) and owns what
# prepare.yml gets there; the tests share its variables and helpers instead of keeping a copy.
_HARNESS_SPEC = importlib.util.spec_from_file_location("harness", REPO_ROOT / "tests" / "harness" / "harness.py")
harness = importlib.util.module_from_spec(_HARNESS_SPEC)
_HARNESS_SPEC.loader.exec_module(harness)

FIXTURE_REPO = harness.FIXTURE_REPO
# Variables that let prepare.yml and build.yml run in a native test container: prepare.yml's (the
# machine's CA for PyPI, the compiler floor only warning), the fixture vLLM tree instead of
# GitHub's, no PyTorch index (unreachable here, and the fixture needs no torch).
BUILD_SETUP = dict(
    harness.PREPARE_VARIABLES,
    vllm_build_git_repo=FIXTURE_REPO,
    vllm_build_torch_index_url="",
    vllm_build_min_free_disk_gib=1,
    vllm_build_poll_interval=2,
    # Every host compiles; the fleet test turns the controller's wheel cache on.
    vllm_build_wheel_cache_dir="",
)


def boot(container):
    """Wait for systemd in the container, and share mounts as systemd expects (credentials)."""
    harness.boot_container(container.name)


@pytest.fixture(scope="session")
def prepared_image():
    """This machine's Debian 12 after prepare.yml with the fixture vLLM repository staged: the build
    and serve tests start from what prepare.yml leaves on a host instead of each re-running apt. The
    harness rebuilds it only when its inputs changed (`make integration` asks before pytest starts;
    its lock makes a second xdist worker wait for the first and then find the image current)."""
    return harness.build_prepared_image()


@pytest.fixture(scope="session")
def build_image():
    """The same prepared Debian 12, for BUILD_ARCH."""
    return harness.build_prepared_image(BUILD_ARCH)


def prepared_host(image, options=()):
    """A booted container from `prepared_image`: a host that prepare.yml has prepared."""
    container = Container(image, systemd=True, options=options)
    try:
        boot(container)
    except BaseException:
        container.remove()
        raise
    return container


# With BUILD_ARCH emulated, the build lifecycle takes longest: collected first, pytest-xdist hands it
# out first, and its worker also builds that architecture's prepared image while the other worker runs
# the native files. The fleet test, which needs that image too, comes last.
COLLECTION_ORDER = {"test_build_lifecycle.py": 0, "test_build_fleet.py": 2}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: COLLECTION_ORDER.get(item.path.name, 1))
