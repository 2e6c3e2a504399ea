"""vllm_build on a native systemd container, for what does not depend on the CPU architecture (the
lifecycle that does runs on aarch64, test_build_lifecycle.py): a build whose controller goes away
mid-compile is adopted by the next run, and a ready-made wheel becomes a release without compiling
and is refused when described as built for another CPU class; an override of a requirement the wheel
does not have (vllm_build_requirement_overrides) fails that release and keeps the current one. The
fixture vLLM tree (tests/fixtures/vllm_source/README.md says what it stands in for) is compiled."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from build_checks import build, current, current_stamp, interrupt, served_version, sleeping, stamp, ROOT
from harness import podman, prepared_host


@pytest.fixture(scope="module")
def host(prepared_image):
    container = prepared_host(prepared_image)
    yield container
    container.remove()


def test_a_build_that_outlives_its_controller_is_adopted_by_the_next_run(host, tmp_path):
    build_dir = interrupt(host, tmp_path, 60)
    assert sleeping(host, 60), "the build did not survive its controller"
    assert current(host) == ""

    result, output = build(host, tmp_path, "v0.32.1", vllm_build_environment={"VLLM_FIXTURE_COMPILE_DELAY": "60"})
    assert result.returncode == 0, output[-3000:]
    # One compile: the new run waited for the running build (or, on a slow machine, found it
    # finished) and took its wheel instead of starting over.
    log = host.exec("cat %s/build.log" % build_dir).stdout
    assert log.count("pip wheel") == 1 and "Successfully built vllm" in log, log[-3000:]
    assert current(host).startswith("releases/v0.32.1-") and served_version(host)[0] == "0.32.1+cpu"


def test_a_ready_made_wheel_becomes_a_release_without_compiling(host, tmp_path):
    built = current_stamp(host)
    wheel = tmp_path / built["wheel"]
    podman("cp", "%s:%s/builds/%s/dist/%s" % (host.name, ROOT, built["identity"], built["wheel"]), str(wheel))
    ready_made = {"vllm_build_method": "wheel", "vllm_build_wheel": str(wheel)}
    result, output = build(host, tmp_path, "v0.32.1", **ready_made)
    assert result.returncode == 0, output[-3000:]
    release = current(host)
    assert release.startswith("releases/vllm-0.32.1-cpu-cp3") and release != "releases/" + built["release"], release
    info = stamp(host, release)
    assert info["source"] == {"method": "wheel", "wheel": str(wheel),
                              "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
    assert host.exec("test -e %s/builds/%s/build.log" % (ROOT, info["identity"])).returncode != 0
    assert served_version(host)[0] == "0.32.1+cpu"
    result, output = build(host, tmp_path, "v0.32.1", **ready_made)
    assert result.returncode == 0 and re.search(r"changed=0\s", output), output[-3000:]

    # The same file described as compiled for another CPU class (as the wheel cache would) is refused in the
    # preflight, before anything changes, naming the wheel, both classes and what this CPU lacks.
    foreign = next(name for name in ("aarch64-dotprod-fp16-bf16-i8mm", "aarch64-dotprod-fp16") if name != built["build_class"])
    (tmp_path / "wheel.json").write_text(json.dumps({"build_class": foreign, "builder": "graviton4-01"}))
    result, output = build(host, tmp_path, "v0.32.1", **ready_made)
    assert result.returncode != 0
    assert "vllm_build_wheel: was compiled on graviton4-01 for build class %s, but this host is %s" % (
        foreign, built["build_class"]) in output, output[-3000:]
    assert re.search(r"changed=0\s", output), output[-3000:]
    assert current(host) == release


def test_an_override_the_wheel_does_not_require_fails_its_release_and_keeps_the_current(host, tmp_path):
    built = current_stamp(host)
    before = current(host)
    wheel = tmp_path / built["wheel"]
    podman("cp", "%s:%s/builds/%s/dist/%s" % (host.name, ROOT, built["identity"], built["wheel"]), str(wheel))
    # The fixture's wheel requires nothing, so an override names a requirement it does not have: pip installs
    # the wheel alone and reports it, and the release stops there.
    result, output = build(host, tmp_path, "v0.32.1", vllm_build_method="wheel", vllm_build_wheel=str(wheel),
                           vllm_build_requirement_overrides={"torch": "torch==2.13.0"})
    assert result.returncode != 0
    assert "vllm_build_requirement_overrides: names torch, which vllm 0.32.1+cpu does not require" in output, output[-3000:]
    assert current(host) == before
    # The release that failed holds pip's report of the wheel alone and no stamp, so it is never activated.
    reports = host.exec("ls %s/releases/*/wheel-install.json" % ROOT).stdout.split()
    assert len(reports) == 1, reports
    assert host.exec("test -e %s/release.json" % reports[0].rsplit("/", 1)[0]).returncode != 0
    report = json.loads(host.exec("cat %s" % reports[0]).stdout)
    assert [item["metadata"]["name"] for item in report["install"]] == ["vllm"]
