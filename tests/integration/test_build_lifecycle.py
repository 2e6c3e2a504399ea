"""vllm_build on a native systemd container, compiling the fixture vLLM tree (tests/fixtures/vllm_source,
its README says what it stands in for) from a local git repository with tags:
build at a tag, an unchanged re-run, a new tag next to the old release, rollback, a tag that fails to
compile (the current release stays), and a build interrupted mid-way that the next run completes.
The aarch64 molecule scenario compiles the same tree with NEON under emulation."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time

import pytest

from conftest import BUILD_SETUP, REPO_ROOT, playbook_command, podman, prepared_host

BUILD = str(REPO_ROOT / "playbooks" / "build.yml")
ROOT = "/opt/vllm"


@pytest.fixture(scope="module")
def host(prepared_image):
    container = prepared_host(prepared_image)
    yield container
    container.remove()


def build(host, tmp_path, ref, **extra):
    result = host.playbook(tmp_path, BUILD, dict(BUILD_SETUP, vllm_build_git_ref=ref, **extra))
    return result, result.stdout + result.stderr


def current(host):
    return host.exec("readlink %s/current" % ROOT).stdout.strip()


def served_version(host):
    probe = "import vllm, vllm._C as c; print(vllm.__version__, c.isa(), c.dot([1.0, 2.0], [3.0, 4.0]))"
    return host.exec("%s/current/venv/bin/python -I -c '%s'" % (ROOT, probe)).stdout.split()


def sleeping(host, seconds):
    """Whether the fixture's slow build step (sleep N) runs; the image has no procps."""
    probe = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -q '^sleep %d $'" % seconds
    return host.exec(probe).returncode == 0


def stamp(host, release):
    return json.loads(host.exec("cat %s/%s/release.json" % (ROOT, release)).stdout)


def test_tag_builds_then_rerun_is_idle(host, tmp_path):
    result, output = build(host, tmp_path, "v0.32.0")
    assert result.returncode == 0, output[-3000:]
    release = current(host)
    assert re.fullmatch(r"releases/v0\.32\.0-[0-9a-f]{16}", release), release
    assert served_version(host) == ["0.32.0+cpu", "generic", "11.0"]
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


def test_new_tag_keeps_the_old_release_and_rollback_returns_to_it(host, tmp_path):
    before = current(host)
    result, output = build(host, tmp_path, "v0.32.1")
    assert result.returncode == 0, output[-3000:]
    after = current(host)
    assert after != before and after.startswith("releases/v0.32.1-")
    assert served_version(host)[0] == "0.32.1+cpu"
    log = host.exec("cat %s/builds/%s/build.log" % (ROOT, stamp(host, after)["identity"])).stdout
    assert "install -r requirements/build/cpu.txt" in log
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


def interrupt(host, tmp_path, delay):
    """Start a build whose compile sleeps `delay` s, and kill the controller once the sleep runs."""
    variables = dict(BUILD_SETUP, vllm_build_git_ref="v0.32.1",
                     vllm_build_environment={"VLLM_FIXTURE_COMPILE_DELAY": str(delay)})
    command, env = playbook_command([host], tmp_path, BUILD, variables)
    controller = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        for dummy in range(180):
            if sleeping(host, delay):
                break
            time.sleep(1)
        else:
            pytest.fail("the slow build never reached its compile step")
    finally:
        # The controller goes away mid-build, as with a dropped SSH session or a closed laptop.
        controller.kill()
        controller.wait()
    return host.exec("dirname $(ls /opt/vllm/builds/*/build.log.owner)").stdout.strip()


def test_a_build_that_outlives_its_controller_is_adopted_by_the_next_run(host, tmp_path):
    before = current(host)
    build_dir = interrupt(host, tmp_path, 60)
    assert sleeping(host, 60), "the build did not survive its controller"
    assert current(host) == before

    result, output = build(host, tmp_path, "v0.32.1", vllm_build_environment={"VLLM_FIXTURE_COMPILE_DELAY": "60"})
    assert result.returncode == 0, output[-3000:]
    # One compile: the new run waited for the running build (or, on a slow machine, found it
    # finished) and took its wheel instead of starting over.
    log = host.exec("cat %s/build.log" % build_dir).stdout
    assert log.count("pip wheel") == 1 and "Successfully built vllm" in log, log[-3000:]
    assert current(host).startswith("releases/v0.32.1-") and served_version(host)[0] == "0.32.1+cpu"


def test_a_killed_build_is_restarted_and_completed_by_the_next_run(host, tmp_path):
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
    assert current(host) != before and served_version(host)[0] == "0.32.1+cpu"


def test_a_ready_made_wheel_becomes_a_release_without_compiling(host, tmp_path):
    built = stamp(host, current(host))
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

    # The same file described as compiled for another CPU class (as the wheel cache would) is refused.
    (tmp_path / "wheel.json").write_text(json.dumps({"build_class": "aarch64-dotprod-fp16-bf16", "builder": "graviton4-01"}))
    result, output = build(host, tmp_path, "v0.32.1", **ready_made)
    assert result.returncode != 0
    assert "was compiled on graviton4-01 for build class aarch64-dotprod-fp16-bf16, but %s is x86_64-" % host.name \
        in output, output[-3000:]
    assert current(host) == release
