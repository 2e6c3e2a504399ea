"""The build driver's recovery from an interrupted run: an earlier build still running is stopped."""

from __future__ import annotations

import os
import subprocess
import time

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
