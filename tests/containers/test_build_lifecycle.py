"""vllm_build on a systemd container of BUILD_ARCH (this machine's own by default; `make build-arm64`
runs it on aarch64, emulated on an x86_64 machine), compiling the fixture vLLM tree (tests/fixtures/vllm_source, its README says what it stands in
for) from a local git repository with tags: build at a tag, an unchanged re-run, a new tag next to the
old release (its first build killed mid-way, restarted and completed by the next run), rollback, and a
tag that fails to compile (the current release stays). Adopted builds and ready-made wheels are in
test_build_adopted_and_ready_made.py."""

from __future__ import annotations

import re
import time

import pytest

from build_checks import build, current, interrupt, served_version, sleeping, stamp, ROOT
from harness import prepared_host


@pytest.fixture(scope="module")
def host(build_image):
    container = prepared_host(build_image)
    yield container
    container.remove()


def test_tag_builds_then_rerun_is_idle(host, tmp_path):
    result, output = build(host, tmp_path, "v0.32.0")
    assert result.returncode == 0, output[-3000:]
    release = current(host)
    assert re.fullmatch(r"releases/v0\.32\.0-[0-9a-f]{16}", release), release
    assert served_version(host) == ["0.32.0+cpu", "11.0"]
    info = stamp(host, release)
    assert info["source"]["ref"] == "v0.32.0" and len(info["source"]["commit"]) == 40
    # v0.32.0 has the pre-rename layout; the role found it there.
    log = host.exec("cat %s/builds/%s/build.log" % (ROOT, info["identity"])).stdout
    assert "install -r requirements/cpu-build.txt" in log and "fixture: VLLM_TARGET_DEVICE=cpu" in log
    assert "fixture: MAX_JOBS=" in log and re.search(r"\[\d+/\d+\] Building CXX object", log)
    # Progress reached the controller while the build ran.
    assert re.search(r"vLLM build \d+m\d\ds ", output), output[-3000:]

    result, output = build(host, tmp_path, "v0.32.0")
    assert result.returncode == 0 and re.search(r"changed=0\s", output), output[-3000:]
    assert current(host) == release


def test_a_new_tag_killed_mid_build_is_completed_by_the_next_run_and_rollback_returns(host, tmp_path):
    before = current(host)
    build_dir = interrupt(host, tmp_path, 21)
    # The host kills the build (OOM killer, reboot): the module and the compile's process group.
    kill = "kill -9 $(cut -d' ' -f1 {0}/build.log.owner); kill -9 -$(cut -d' ' -f1 {0}/build.log.running)"
    assert host.exec(kill.format(build_dir)).returncode == 0
    time.sleep(1)
    assert not sleeping(host, 21) and current(host) == before

    result, output = build(host, tmp_path, "v0.32.1", vllm_build_environment={"VLLM_FIXTURE_COMPILE_DELAY": "21"})
    assert result.returncode == 0, output[-3000:]
    log = host.exec("cat %s/build.log" % build_dir).stdout
    assert log.count("pip wheel") == 2 and "waiting for the build" not in log, log[-3000:]
    # v0.32.1 has the renamed requirement files; the role found them there.
    assert "install -r requirements/build/cpu.txt" in log
    after = current(host)
    assert after != before and after.startswith("releases/v0.32.1-")
    assert served_version(host)[0] == "0.32.1+cpu"
    assert host.exec("test -f %s/%s/release.json" % (ROOT, before)).returncode == 0

    result, output = build(host, tmp_path, "v0.32.1", vllm_build_rollback=True)
    assert result.returncode == 0, output[-3000:]
    assert current(host) == before and served_version(host)[0] == "0.32.0+cpu"


def test_a_ref_that_fails_to_compile_leaves_the_current_release(host, tmp_path):
    before = current(host)
    result, output = build(host, tmp_path, "v0.32.2-broken")
    assert result.returncode != 0
    assert "fixture_undeclared_bias" in output and "build.log" in output, output[-3000:]
    assert current(host) == before and served_version(host)[0] == "0.32.0+cpu"
