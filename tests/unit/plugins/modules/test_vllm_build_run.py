"""The build driver's recovery from an interrupted run (an earlier build still running is stopped), and the
requirement files its pip installs under vllm_build_requirement_overrides."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from ansible_collections.arm_inference.vllm.plugins.modules import vllm_build_run


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def test_earlier_build_process_group_is_stopped(tmp_path):
    # A stand-in for a compile left running by a run whose controller went away: a process group
    # with a child, like pip -> cmake -> ninja.
    earlier = subprocess.Popen(["sh", "-c", "sleep 300 & wait"], start_new_session=True)
    time.sleep(0.3)
    marker = tmp_path / "build.log.running"
    marker.write_text("%d %s\n" % (earlier.pid, vllm_build_run._start_time(earlier.pid)))
    assert vllm_build_run.stop_earlier_build(str(marker)) == earlier.pid
    earlier.wait(timeout=10)
    assert not alive(earlier.pid)


def test_reused_pid_is_left_alone(tmp_path):
    marker = tmp_path / "build.log.running"
    marker.write_text("%d 1\n" % os.getpid())
    assert vllm_build_run.stop_earlier_build(str(marker)) is None
    assert vllm_build_run.stop_earlier_build(str(tmp_path / "absent")) is None


def test_step_wrapper_records_its_process_group_for_the_next_run(tmp_path):
    marker, log = tmp_path / "build.log.running", tmp_path / "build.log"
    step = subprocess.Popen(["setsid", "sh", "-c", vllm_build_run._STEP_WRAPPER, str(marker), "sh", "-c", "echo compiling; sleep 300"],
                            env={"BUILD_LOG": str(log), "PATH": "/usr/bin:/bin"})
    for dummy in range(50):
        if marker.exists() and "compiling" in log.read_text():
            break
        time.sleep(0.1)
    pgid = int(marker.read_text().split()[0])
    assert vllm_build_run.stop_earlier_build(str(marker)) == pgid
    step.wait(timeout=10)
    assert not alive(pgid)


class RecordingModule:
    """Records the commands run_steps would run (wrapped in setsid sh -c); each succeeds."""

    def __init__(self):
        self.commands = []

    def run_command(self, argv, cwd=None, environ_update=None):
        self.commands.append(argv[argv.index(vllm_build_run._STEP_WRAPPER) + 2:])
        return 0, "", ""


def test_overrides_make_pip_install_copies_of_the_requirement_files(tmp_path):
    tree = tmp_path / "src"
    (tree / "requirements").mkdir(parents=True)
    (tree / "requirements" / "common.txt").write_text("regex\n")
    (tree / "requirements" / "cpu.txt").write_text(
        "-r common.txt\ntriton @ https://github.com/triton-lang/triton-cpu/t.whl ; platform_machine == \"x86_64\"\nnumba\n")
    params = {"venv": str(tmp_path / "venv"), "source": str(tree), "dist": str(tmp_path / "dist"), "log": str(tmp_path / "log"),
              "environment": {}, "pip_args": [], "requirements": ["requirements/cpu.txt"],
              "requirement_overrides": {"triton": ""}}
    module = RecordingModule()
    vllm_build_run.run_steps(module, params, str(tmp_path / "stamp"), "marker")
    pip = str(tmp_path / "venv" / "bin" / "pip")
    assert module.commands[0] == [pip, "install", "-r", "requirements/cpu.arm-inference.txt"]
    assert (tree / "requirements" / "cpu.arm-inference.txt").read_text() == "-r common.arm-inference.txt\nnumba\n"
    assert module.commands[1][:3] == [pip, "wheel", "--no-build-isolation"]

    module = RecordingModule()
    vllm_build_run.run_steps(module, dict(params, requirement_overrides={}), str(tmp_path / "stamp"), "marker")
    assert module.commands[0] == [pip, "install", "-r", "requirements/cpu.txt"]


class RunningModule:
    """Runs run_steps' commands for real; fail_json raises with its message."""

    def run_command(self, argv, cwd=None, environ_update=None):
        done = subprocess.run(argv, cwd=cwd, env=dict(os.environ, **(environ_update or {})), capture_output=True,
                              text=True, check=False)
        return done.returncode, done.stdout, done.stderr

    def fail_json(self, msg, **kwargs):
        raise AssertionError(msg)


def test_a_step_killed_by_a_signal_is_named(tmp_path):
    """A real SIGILL in a build step (a pip that dies of it, as a binary built for another CPU would): the
    failure names the signal, not an exit code of -4."""
    tree, venv = tmp_path / "src", tmp_path / "venv"
    (tree / "requirements").mkdir(parents=True)
    (tree / "requirements" / "cpu.txt").write_text("numba\n")
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "pip").write_text("#!/bin/sh\nkill -ILL $$\n")
    (venv / "bin" / "pip").chmod(0o755)
    params = {"venv": str(venv), "source": str(tree), "dist": str(tmp_path / "dist"), "log": str(tmp_path / "log"),
              "environment": {}, "pip_args": [], "requirements": ["requirements/cpu.txt"], "requirement_overrides": {}}
    with pytest.raises(AssertionError) as failed:
        vllm_build_run.run_steps(RunningModule(), params, str(tmp_path / "stamp"), str(tmp_path / "marker"))
    assert str(failed.value).startswith("vLLM build step failed (killed by SIGILL (illegal instruction)): %s install" % (venv / "bin" / "pip"))
