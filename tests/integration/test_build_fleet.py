"""Build once per CPU class for a fleet, on native systemd containers: two hosts of this machine's
class and one whose /proc/cpuinfo is replaced by a copy without AVX2/AVX-512 (another build class)
run build.yml together with the controller's wheel cache. One compile per class; the second host of
a class installs the first one's wheel; the other class never gets it. The fixture vLLM tree is
compiled (tests/fixtures/vllm_source/README.md says what it stands in for)."""

from __future__ import annotations

import json
import re

import pytest

from conftest import BUILD_SETUP, NATIVE, REPO_ROOT, run_playbook, prepared_host

VECTOR_FLAGS = re.compile(r"^(avx2|avx512\w*|amx\w*)$")


def cpuinfo_of_another_class(path):
    """This machine's /proc/cpuinfo without the vector extensions that decide the x86_64 build class."""
    with open("/proc/cpuinfo") as handle:
        lines = handle.read().splitlines()
    kept = []
    for line in lines:
        if line.startswith("flags"):
            name, flags = line.split(":", 1)
            line = "%s: %s" % (name, " ".join(flag for flag in flags.split() if not VECTOR_FLAGS.match(flag)))
        kept.append(line)
    path.write_text("\n".join(kept) + "\n")
    return path


@pytest.fixture(scope="module")
def fleet(prepared_image, tmp_path_factory):
    if NATIVE != "amd64":
        pytest.skip("the other-class host fakes an x86_64 /proc/cpuinfo")
    fake = cpuinfo_of_another_class(tmp_path_factory.mktemp("cpuinfo") / "cpuinfo")
    hosts = []
    try:
        hosts.append(prepared_host(prepared_image))
        hosts.append(prepared_host(prepared_image))
        hosts.append(prepared_host(prepared_image, options=["-v", "%s:/proc/cpuinfo:ro" % fake]))
        yield hosts
    finally:
        for host in hosts:
            host.remove()


def run(hosts, tmp_path, playbook, variables):
    result = run_playbook(hosts, tmp_path, str(REPO_ROOT / "playbooks" / playbook), variables)
    return result, result.stdout + result.stderr


def release(host):
    name = host.exec("readlink /opt/vllm/current").stdout.strip()
    return json.loads(host.exec("cat /opt/vllm/%s/release.json" % name).stdout)


def test_one_compile_per_class_and_no_wheel_crosses_classes(fleet, tmp_path):
    cache = tmp_path / "wheels"
    variables = dict(BUILD_SETUP, vllm_build_wheel_cache_dir=str(cache))
    result, output = run(fleet, tmp_path, "build.yml", variables)
    assert result.returncode == 0, output[-3000:]

    first, second, other = (release(host) for host in fleet)
    assert first["identity"] == second["identity"] and first["build_class"] == second["build_class"]
    assert other["build_class"] != first["build_class"] and other["identity"] != first["identity"]
    assert other["build_class"] == "x86_64-baseline"

    def compiled(host, stamp):
        return host.exec("test -f /opt/vllm/builds/%s/build.log" % stamp["identity"]).returncode == 0

    # Exactly one compile for the shared class (the first host in play order), one for the other.
    assert compiled(fleet[0], first) and not compiled(fleet[1], second) and compiled(fleet[2], other)
    copied = json.loads(fleet[1].exec("cat /opt/vllm/builds/%s/build.json" % second["identity"]).stdout)
    assert copied["builder"] == fleet[0].name and copied["wheel"] == first["wheel"]
    entries = sorted(path.relative_to(cache).parts[0] for path in cache.glob("*/*/*/*/wheel.json"))
    assert entries == sorted([first["build_class"], other["build_class"]])

    # A wheel of one class put by hand where the other class looks is refused, not installed.
    own = next(cache.glob("%s/*/*/*" % first["build_class"]))
    foreign = cache / other["build_class"] / own.relative_to(cache / first["build_class"])
    foreign = foreign.parent / other["identity"]
    fleet[2].exec("rm -rf /opt/vllm/releases/*/ /opt/vllm/builds/* /opt/vllm/current")
    for item in own.iterdir():
        (foreign / item.name).write_bytes(item.read_bytes())
    result, output = run([fleet[2]], tmp_path, "build.yml", variables)
    assert result.returncode != 0
    assert "was compiled on %s for build class %s" % (fleet[0].name, first["build_class"]) in output, output[-3000:]
    assert "but %s is x86_64-baseline" % fleet[2].name in output, output[-3000:]
    assert fleet[2].exec("test -e /opt/vllm/current").returncode != 0
