"""Verify what prepare.yml (part of site.yml) leaves on a molecule container: build deps, tcmalloc and the venv.

Runs against every platform of a scenario; the expected architecture comes from the platform
name suffix (debian12-arm64 -> aarch64). Under qemu every command costs seconds, so related
checks share one command where that keeps them readable.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

pytestmark = pytest.mark.skipif(os.environ.get("MOLECULE_SCENARIO_NAME") == "engine",
                                reason="the engine scenario's target compiles nothing and installs offline: no build toolchain in its "
                                "venv and no index in its pip.conf (test_engine checks what it has)")


def _podman_hosts():
    """Address molecule's instances through `podman exec` instead of molecule's default ansible
    backend, which runs a Python module per command: under qemu that costs ~5 s a command."""
    inventory = yaml.safe_load(open(os.environ["MOLECULE_INVENTORY_FILE"], encoding="utf-8"))
    names = set()

    def collect(group):
        names.update((group or {}).get("hosts") or {})
        for child in ((group or {}).get("children") or {}).values():
            collect(child)

    collect(inventory.get("all"))
    return ["podman://%s" % name for name in sorted(names)]


testinfra_hosts = _podman_hosts()

VENV = "/opt/vllm/venv"
ARCH_BY_SUFFIX = {"arm64": "aarch64", "amd64": "x86_64"}
# The OS default Python for vLLM per Debian major release (plugins/filter/platform.py).
PYTHON_BY_DEBIAN_RELEASE = {"12": "3.11", "13": "3.13"}

NEON_PROGRAM = r"""
#include <arm_neon.h>
#include <numa.h>
#include <cstdio>
#include <span>
int main() {
    float data[4] = {1.5f, 2.0f, 2.5f, 3.0f};
    std::span<float> view(data);
    float32x4_t v = vld1q_f32(view.data());
    float32x4_t doubled = vaddq_f32(v, v);
    std::printf("neon=%.1f numa_api=%d\n", vgetq_lane_f32(doubled, 3), numa_available() >= -1);
    return 0;
}
"""


def _version_tuple(text):
    return tuple(int(part) for part in text.split("."))


@pytest.fixture(scope="module")
def expected_arch(host):
    return ARCH_BY_SUFFIX[host.backend.get_hostname().rsplit("-", 1)[1]]


@pytest.fixture(scope="module")
def python_version(host):
    release = host.file("/etc/debian_version").content_string.strip().split(".")[0]
    return PYTHON_BY_DEBIAN_RELEASE[release]


def test_runs_on_the_expected_architecture(host, expected_arch):
    assert host.system_info.arch == expected_arch
    assert host.check_output("uname -m") == expected_arch


def test_compiler_builds_and_runs_vllm_style_neon_code(host, expected_arch):
    if expected_arch != "aarch64":
        pytest.skip("NEON program is aarch64 only")
    host.run_expect([0], "mkdir -p /tmp/neon && cat > /tmp/neon/t.cpp <<'EOF'\n%s\nEOF" % NEON_PROGRAM)
    # The flags vLLM's cpu_extension.cmake uses on aarch64 without bf16, plus OpenMP and libnuma.
    build = host.run(
        "g++-12 -std=c++20 -O2 -march=armv8.2-a+dotprod+fp16 -fopenmp /tmp/neon/t.cpp -lnuma -o /tmp/neon/t "
        "|| g++-14 -std=c++20 -O2 -march=armv8.2-a+dotprod+fp16 -fopenmp /tmp/neon/t.cpp -lnuma -o /tmp/neon/t"
    )
    assert build.rc == 0, build.stderr
    assert host.check_output("/tmp/neon/t") == "neon=6.0 numa_api=1"


def test_build_tools_are_present_with_usable_versions(host, python_version):
    cmake = VENV + "/bin/cmake" if host.file(VENV + "/bin/cmake").exists else "cmake"
    cmake_version = host.check_output("%s --version" % cmake).split()[2]
    assert (3, 26, 1) <= _version_tuple(cmake_version) < (4, 0, 0), cmake_version
    tools = host.run("ninja --version && ccache --version | head -1 && git --version")
    assert tools.rc == 0, tools.stderr
    include = host.check_output(
        "python%s -c \"import sysconfig; print(sysconfig.get_paths()['include'])\"" % python_version
    )
    assert host.file(include + "/Python.h").is_file


def test_tcmalloc_is_mapped_by_a_preloaded_process_and_only_then(host):
    package = host.check_output("dpkg-query -W -f '${Package}\\n' 'libtcmalloc-minimal4*'").splitlines()[0]
    library = [
        path
        for path in host.check_output("dpkg-query -L %s" % package).splitlines()
        if path.endswith("/libtcmalloc_minimal.so.4")
    ][0]
    real = host.check_output("readlink -f %s" % library)
    preloaded = host.check_output("LD_PRELOAD=%s sleep 60 >/dev/null 2>&1 & echo $!" % library)
    plain = host.check_output("sleep 60 >/dev/null 2>&1 & echo $!")
    try:
        assert real in host.file("/proc/%s/maps" % preloaded).content_string
        assert "tcmalloc" not in host.file("/proc/%s/maps" % plain).content_string
    finally:
        host.run("kill %s %s" % (preloaded, plain))


def test_venv_user_is_a_locked_system_account(host):
    user = host.user("vllm")
    assert user.exists and user.group == "vllm"
    assert user.shell == "/usr/sbin/nologin"
    assert user.uid < 1000
    assert host.file(user.home).mode == 0o750


def test_venv_is_owned_by_the_user_with_pinned_tools(host, python_version):
    assert host.file(VENV).user == "vllm"
    assert host.file(VENV + "/bin/python").linked_to.endswith("python%s" % python_version)
    installed = {
        item["name"]: item["version"]
        for item in json.loads(host.check_output(VENV + "/bin/python -m pip list --format=json"))
    }
    assert installed["pip"] == "26.3"
    assert installed["setuptools"] == "80.9.0"
    assert installed["wheel"] == "0.45.1"


def test_pip_configuration_is_private_and_reaches_the_index(host):
    conf = host.file(VENV + "/pip.conf")
    assert (conf.user, conf.group, conf.mode) == ("root", "vllm", 0o640)
    assert "cert = %s/pip-ca-bundle.pem" % VENV in conf.content_string
    # A real download through the venv's own configuration, as the venv user: proves the CA bundle
    # handed in is what lets pip through this machine's TLS-intercepting proxy.
    download = host.run(
        "cd /tmp && sudo -u vllm %s/bin/pip download --no-deps --no-cache-dir -d /tmp/pipcheck six==1.16.0" % VENV
    )
    assert download.rc == 0, download.stderr


# Hosts whose scenario sets build_deps_rust_enabled (molecule/debian13/host_vars).
RUST_ENABLED_HOSTS = {"debian13-arm64"}


def test_rust_tools_exactly_when_requested(host):
    if host.backend.get_hostname() in RUST_ENABLED_HOSTS:
        assert host.run_expect([0], "rustup --version").stdout.startswith("rustup ")
        assert host.run_expect([0], "protoc --version").stdout.startswith("libprotoc ")
        assert host.package("libssl-dev").is_installed
    else:
        assert not host.exists("rustup")
        assert not host.exists("protoc")
