"""Build once per CPU class for a fleet, on systemd containers of BUILD_ARCH (this machine's own by
default; `make build-arm64` runs it on aarch64, emulated on an x86_64 machine): two hosts of one class
and one of another run build.yml together with the controller's wheel cache. One compile per class; the
second host of a class installs the first one's wheel; a wheel never crosses classes. The fixture vLLM
tree is compiled (tests/fixtures/vllm_source/README.md says what it stands in for).

The classes come from /proc/cpuinfo, replaced in each container by a file: on aarch64 the published
dumps of a Graviton2 (Neoverse-N1: dotprod and fp16, no bf16 or i8mm) and a Graviton4 (bf16 and i8mm), the pair whose
shared wheel would crash with illegal instructions; on x86_64 this machine's own cpuinfo, and a copy
of it with the other vector class: without AVX2/AVX-512/AMX, or with AVX-512 on a machine that has none."""

from __future__ import annotations

import json
import re

import pytest

from build_checks import build_on, current_stamp, ROOT
from harness import BUILD_ARCH, NATIVE as NATIVE_ARCH, REPO_ROOT, prepared_host

SAMPLES = REPO_ROOT / "tests" / "unit" / "samples"
VECTOR_FLAGS = re.compile(r"^(avx2|avx512\w*|amx\w*)$")


def cpuinfo_of_the_other_vector_class(path):
    """This machine's /proc/cpuinfo in the other x86_64 build class: without the vector extensions that
    decide it, or, on a machine that has none of them, with AVX-512. Returns (path, the class's name)."""
    with open("/proc/cpuinfo") as handle:
        lines = handle.read().splitlines()
    has_vector = any(VECTOR_FLAGS.match(flag) for line in lines if line.startswith("flags")
                     for flag in line.split(":", 1)[1].split())
    kept = []
    for line in lines:
        if line.startswith("flags"):
            name, flags = line.split(":", 1)
            flags = [flag for flag in flags.split() if not VECTOR_FLAGS.match(flag)]
            line = "%s: %s" % (name, " ".join(flags if has_vector else flags + ["avx2", "avx512f"]))
        kept.append(line)
    path.write_text("\n".join(kept) + "\n")
    return path, "x86_64-baseline" if has_vector else "x86_64-avx512f"


def fleet_cpuinfo(directory):
    """(cpuinfo of the shared class or None for this machine's own, cpuinfo of the other class, the
    other class's name, whether the other class's wheel is the one offered across)."""
    if BUILD_ARCH == "arm64":
        # The bf16 wheel is the dangerous one: offered to a Neoverse-N1 host, it must be refused.
        return (SAMPLES / "graviton2-t4g" / "cpuinfo", SAMPLES / "graviton4-m8g-2xlarge" / "cpuinfo",
                "aarch64-dotprod-fp16-bf16-i8mm", True)
    if BUILD_ARCH == "amd64" and BUILD_ARCH == NATIVE_ARCH:
        other, other_class = cpuinfo_of_the_other_vector_class(directory / "cpuinfo")
        return None, other, other_class, False
    pytest.skip("no fleet classes for BUILD_ARCH=%s on this machine" % BUILD_ARCH)


def cpuinfo_mount(path):
    return ["-v", "%s:/proc/cpuinfo:ro" % path] if path else []


@pytest.fixture(scope="module")
def fleet(build_image, tmp_path_factory):
    shared, other, other_class, offer_other = fleet_cpuinfo(tmp_path_factory.mktemp("cpuinfo"))
    hosts = []
    try:
        hosts.append(prepared_host(build_image, options=cpuinfo_mount(shared)))
        hosts.append(prepared_host(build_image, options=cpuinfo_mount(shared)))
        hosts.append(prepared_host(build_image, options=cpuinfo_mount(other)))
        yield hosts, other_class, offer_other
    finally:
        for host in hosts:
            host.remove()


def test_one_compile_per_class_and_no_wheel_crosses_classes(fleet, tmp_path):
    hosts, other_class, offer_other = fleet
    cache = tmp_path / "wheels"
    result, output = build_on(hosts, tmp_path, vllm_build_wheel_cache_dir=str(cache))
    assert result.returncode == 0, output[-3000:]

    first, second, other = (current_stamp(host) for host in hosts)
    assert first["identity"] == second["identity"] and first["build_class"] == second["build_class"]
    assert other["build_class"] == other_class and other["identity"] != first["identity"]
    assert first["build_class"] != other_class and first["build_class"].startswith(other_class.split("-")[0] + "-")

    def compiled(host, stamp):
        return host.exec("test -f %s/builds/%s/build.log" % (ROOT, stamp["identity"])).returncode == 0

    # Exactly one compile for the shared class (the first host in play order), one for the other.
    assert compiled(hosts[0], first) and not compiled(hosts[1], second) and compiled(hosts[2], other)
    copied = json.loads(hosts[1].exec("cat %s/builds/%s/build.json" % (ROOT, second["identity"])).stdout)
    assert copied["builder"] == hosts[0].name and copied["wheel"] == first["wheel"]
    entries = sorted(path.relative_to(cache).parts[0] for path in cache.glob("*/*/*/*/wheel.json"))
    assert entries == sorted([first["build_class"], other["build_class"]])

    # A wheel of one class put by hand where the other class looks is refused by a host of that other
    # class, which starts from nothing and is left with nothing.
    if offer_other:
        donor, donor_host, receiver, receiver_host = other, hosts[2], first, hosts[1]
    else:
        donor, donor_host, receiver, receiver_host = first, hosts[0], other, hosts[2]
    own = cache / donor["build_class"] / donor["os"] / donor["python"] / donor["identity"]
    foreign = cache / receiver["build_class"] / receiver["os"] / receiver["python"] / receiver["identity"]
    receiver_host.exec("rm -rf {0}/releases/*/ {0}/builds/* {0}/current".format(ROOT))
    for item in foreign.iterdir():
        item.unlink()
    for item in own.iterdir():
        (foreign / item.name).write_bytes(item.read_bytes())
    result, output = build_on([receiver_host], tmp_path, vllm_build_wheel_cache_dir=str(cache))
    assert result.returncode != 0
    assert "was compiled on %s for build class %s" % (donor_host.name, donor["build_class"]) in output, output[-3000:]
    assert "but %s is %s" % (receiver_host.name, receiver["build_class"]) in output, output[-3000:]
    assert receiver_host.exec("test -e %s/current" % ROOT).returncode != 0
