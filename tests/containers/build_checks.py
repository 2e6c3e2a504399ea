"""What the vllm_build container tests do to and read from a prepared host: run build.yml at a ref,
read `current` and its release stamp, probe the installed fixture vLLM, and interrupt a build."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from harness import BUILD_SETUP, REPO_ROOT, playbook_command, run_playbook

BUILD = str(REPO_ROOT / "playbooks" / "build.yml")
ROOT = "/opt/vllm"
# How long a build.yml run may take to reach the fixture's compile step (emulated: minutes).
COMPILE_STEP_TIMEOUT = 600


def build_on(hosts, tmp_path, ref=None, **extra):
    """Run build.yml on `hosts` in one play with the tests' setup, at git ref `ref` when given, plus
    `extra` variables; return the process and its whole output."""
    variables = dict(BUILD_SETUP, **extra)
    if ref is not None:
        variables["vllm_build_git_ref"] = ref
    result = run_playbook(hosts, tmp_path, BUILD, variables)
    return result, result.stdout + result.stderr


def build(host, tmp_path, ref=None, **extra):
    return build_on([host], tmp_path, ref, **extra)


def current(host):
    return host.exec("readlink %s/current" % ROOT).stdout.strip()


def stamp(host, release):
    return json.loads(host.exec("cat %s/%s/release.json" % (ROOT, release)).stdout)


def current_stamp(host):
    return stamp(host, current(host))


def served_version(host):
    """The current release's version and a dot product computed by its compiled extension, whose
    instruction set is checked against the release's build class."""
    probe = "import vllm, vllm._C as c; print(vllm.__version__, c.isa(), c.dot([1.0, 2.0], [3.0, 4.0]))"
    version, isa, dot = host.exec("%s/current/venv/bin/python -I -c '%s'" % (ROOT, probe)).stdout.split()
    build_class = current_stamp(host)["build_class"]
    machine = host.exec("uname -m").stdout.strip()
    assert build_class.startswith(machine + "-"), (build_class, machine)
    if machine == "aarch64":
        # The fixture's CMake, like vLLM's, adds +bf16 and +i8mm each when the CPU has it; the class says which.
        expected = "-".join(["neon"] + [name for name in ("bf16", "i8mm") if name in build_class.split("-")])
        assert isa == expected, (isa, build_class)
    else:
        assert isa == "generic", isa
    return [version, dot]


def sleeping(host, seconds):
    """Whether the fixture's slow build step (sleep N) runs; the image has no procps. Under qemu-user
    emulation a command line starts with the interpreter (.../aarch64-binfmt-P /usr/bin/sleep sleep N)."""
    probe = ("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done "
             "| grep -Eq '(^|binfmt-P [^ ]*/sleep )sleep %d $'" % seconds)
    return host.exec(probe).returncode == 0


def interrupt(host, tmp_path, delay):
    """Start a build whose compile sleeps `delay` s, and kill the controller once the sleep runs;
    return the build's directory."""
    variables = dict(BUILD_SETUP, vllm_build_git_ref="v0.32.1",
                     vllm_build_environment={"VLLM_FIXTURE_COMPILE_DELAY": str(delay)})
    command, env = playbook_command([host], tmp_path, BUILD, variables)
    controller = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + COMPILE_STEP_TIMEOUT
        while not sleeping(host, delay):
            if time.monotonic() > deadline or controller.poll() is not None:
                pytest.fail("the slow build never reached its compile step (controller exit %s)" % controller.poll())
            time.sleep(1)
    finally:
        # The controller goes away mid-build, as with a dropped SSH session or a closed laptop.
        controller.kill()
        controller.wait()
    return host.exec("dirname $(ls %s/builds/*/build.log.owner)" % ROOT).stdout.strip()
