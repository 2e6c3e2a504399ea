#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_build_run
short_description: Compile a vLLM source tree into a wheel, logging every step to a file
version_added: 0.1.0
description:
  - Installs the tree's build and runtime requirements into the build venv, then builds the wheel with
    C(pip wheel --no-build-isolation --no-deps -v) (vLLM's documented CPU recipe), with the given
    environment (C(VLLM_TARGET_DEVICE), C(MAX_JOBS), compiler launcher, ...).
  - All output goes to O(log), appended, so a long build can be followed while it runs (see
    M(arm_inference.vllm.vllm_build_wait)) and read after it failed.
  - Meant to run as an Ansible async job, so the build survives a dropped SSH connection. When a build of
    the same tree started by an earlier run is still going (its controller went away), this waits for it
    and takes its wheel. When that build died instead, whatever it left running is stopped and the build
    starts over, resuming from the CMake build directory inside the tree and ccache.
  - On success writes C(build.json) next to the log, naming the wheel. Nothing is installed outside the
    build venv and O(dist).
options:
  venv:
    description: Build venv (its C(bin/pip) and C(bin/python) are used).
    type: path
    required: true
  source:
    description: Source tree to build.
    type: path
    required: true
  dist:
    description: Directory for the wheel; emptied first.
    type: path
    required: true
  log:
    description: Build log, appended to.
    type: path
    required: true
  requirements:
    description: Requirement files (relative to O(source)) installed into the venv before the build, in order.
    type: list
    elements: str
    default: []
  requirement_overrides:
    description:
      - Distribution name to the requirement installed instead of the files' own lines for it, or an empty string
        to leave it out (the role's C(vllm_build_requirement_overrides)). The venv then installs copies of the files
        (C(<name>.arm-inference.txt), includes followed); the tree's own files are left as they are.
    type: dict
    default: {}
  pip_args:
    description: Extra arguments for the requirement installs (for example the PyTorch CPU index).
    type: list
    elements: str
    default: []
  environment:
    description: Variables added to the build's environment.
    type: dict
    default: {}
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Does not support check mode (it is the build itself).
"""

EXAMPLES = r"""
- name: Build vLLM in the background
  arm_inference.vllm.vllm_build_run:
    venv: /opt/vllm/venv
    source: /opt/vllm/builds/3f5c0a9e1b2d4c6f/src
    dist: /opt/vllm/builds/3f5c0a9e1b2d4c6f/dist
    log: /opt/vllm/builds/3f5c0a9e1b2d4c6f/build.log
    requirements: [requirements/build/cpu.txt, requirements/cpu.txt]
    environment:
      VLLM_TARGET_DEVICE: cpu
      MAX_JOBS: "8"
  async: 10800
  poll: 0
  register: __vllm_build_job
"""

RETURN = r"""
wheel:
  description: Path of the built wheel.
  returned: success
  type: str
  sample: /opt/vllm/builds/3f5c0a9e1b2d4c6f/dist/vllm-0.32.0+cpu-cp38-abi3-linux_aarch64.whl
torch:
  description: PyTorch version in the build venv when the wheel was built, or null when there is none.
  returned: success
  type: str
stopped_earlier_build:
  description: Process group of an earlier build step of this tree that was left running and was stopped.
  returned: success
  type: int
adopted_earlier_build:
  description: Whether the wheel comes from a build an earlier run started, which this one waited for.
  returned: success
  type: bool
"""

import datetime
import glob
import json
import os
import signal
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build
from ansible_collections.arm_inference.vllm.plugins.module_utils.process_signals import exit_words

TAIL_LINES = 40
TORCH_PROBE = "import importlib.metadata as m\ntry:\n print(m.version('torch'))\nexcept m.PackageNotFoundError:\n pass"


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _start_time(pid):
    """Kernel start time of a live process: tells a running build from a reused pid (None: gone)."""
    try:
        with open("/proc/%d/stat" % pid, encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _recorded_live_process(marker):
    """(pid, start time) from a marker an earlier attempt wrote, if that very process still runs."""
    try:
        with open(marker, encoding="ascii") as handle:
            pid, started = handle.read().split()
        pid = int(pid)
    except (OSError, ValueError):
        return None
    return (pid, started) if _start_time(pid) == started else None


def stop_earlier_build(marker):
    """Stop the process group recorded by an earlier attempt if it still runs; return its id."""
    recorded = _recorded_live_process(marker)
    if recorded is None:
        return None
    pgid, started = recorded
    for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 5)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return pgid
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _start_time(pgid) == started:
            time.sleep(0.5)
    return pgid


def _record_owner(path):
    with open(path, "w", encoding="ascii") as handle:
        handle.write("%d %s\n" % (os.getpid(), _start_time(os.getpid())))


def wait_for_earlier_owner(path, log):
    """Wait while the module process of an earlier run still builds this tree; True if there was one."""
    recorded = _recorded_live_process(path)
    if recorded is None or recorded[0] == os.getpid():
        return False
    pid, started = recorded
    with open(log, "ab") as handle:
        handle.write(("\n==> %s  waiting for the build an earlier run started (pid %d)\n" % (_now(), pid)).encode())
    while _start_time(pid) == started:
        time.sleep(2)
    return True


def _tail(path):
    try:
        return vllm_build.read_log_end(path).splitlines()[-TAIL_LINES:]
    except OSError:
        return []


# setsid gives the step its own process group (so a later run can stop all of it: pip, cmake,
# ninja, compilers); the shell records that group's id and start time, then becomes the command.
_STEP_WRAPPER = 'printf "%s %s\\n" $$ "$(cut -d" " -f22 /proc/$$/stat)" > "$0"; exec "$@" >> "$BUILD_LOG" 2>&1 < /dev/null'


def run_step(module, argv, cwd, env, log, marker):
    """Run one command in its own process group, output appended to the log."""
    with open(log, "ab") as handle:
        handle.write(("\n==> %s  %s\n" % (_now(), " ".join(argv))).encode())
    wrapped = ["setsid", "sh", "-c", _STEP_WRAPPER, marker] + argv
    code, dummy_out, dummy_err = module.run_command(wrapped, cwd=cwd, environ_update=dict(env, BUILD_LOG=log))
    return code


def run_steps(module, params, stamp, marker):
    """Requirements into the build venv, then the wheel; fail with the log tail at the first error."""
    pip = os.path.join(params["venv"], "bin", "pip")
    env = {"PYTHONUNBUFFERED": "1", "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.update({str(key): str(value) for key, value in params["environment"].items()})
    if os.path.exists(stamp):
        os.remove(stamp)
    os.makedirs(params["dist"], exist_ok=True)
    for stale in glob.glob(os.path.join(params["dist"], "*")):
        os.remove(stale)
    names = [vllm_build.override_requirement_files(params["source"], name, params["requirement_overrides"])
             for name in params["requirements"]]
    steps = [[pip, "install", "-r", name] + params["pip_args"] for name in names]
    steps.append([pip, "wheel", "--no-build-isolation", "--no-deps", "-v", "--wheel-dir", params["dist"], "."])
    for argv in steps:
        code = run_step(module, argv, params["source"], env, params["log"], marker)
        if code != 0:
            module.fail_json(msg="vLLM build step failed (%s): %s. Full log: %s"
                             % (exit_words(code), " ".join(argv), params["log"]), log_tail=_tail(params["log"]))


def write_record(module, params, stamp, started):
    """build.json names the wheel; it is written before the markers go, so a waiting run finds it."""
    wheels = sorted(glob.glob(os.path.join(params["dist"], "*.whl")))
    if len(wheels) != 1:
        module.fail_json(msg="Expected one wheel in %s after the build, found %d." % (params["dist"], len(wheels)),
                         log_tail=_tail(params["log"]))
    dummy_rc, torch, dummy_err = module.run_command([os.path.join(params["venv"], "bin", "python"), "-I", "-c", TORCH_PROBE])
    record = {"wheel": os.path.basename(wheels[0]), "torch": torch.strip() or None, "finished": _now(),
              "seconds": round(time.monotonic() - started), "environment": params["environment"]}
    with open(stamp, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2, sort_keys=True)
    return record


def main():
    module = AnsibleModule(
        argument_spec={
            "venv": {"type": "path", "required": True},
            "source": {"type": "path", "required": True},
            "dist": {"type": "path", "required": True},
            "log": {"type": "path", "required": True},
            "requirements": {"type": "list", "elements": "str", "default": []},
            "requirement_overrides": {"type": "dict", "default": {}},
            "pip_args": {"type": "list", "elements": "str", "default": []},
            "environment": {"type": "dict", "default": {}},
        },
        supports_check_mode=False,
    )
    params = module.params
    marker, owner = params["log"] + ".running", params["log"] + ".owner"
    stamp = os.path.join(os.path.dirname(params["log"]), "build.json")
    adopted = wait_for_earlier_owner(owner, params["log"])
    if adopted and os.path.exists(stamp):
        with open(stamp, encoding="utf-8") as handle:
            record = json.load(handle)
        wheel = os.path.join(params["dist"], record.get("wheel", ""))
        if os.path.isfile(wheel):
            module.exit_json(changed=True, wheel=wheel, torch=record.get("torch"), stopped_earlier_build=None,
                             adopted_earlier_build=True, seconds=record.get("seconds"))
    _record_owner(owner)
    try:
        stopped = stop_earlier_build(marker)
        started = time.monotonic()
        run_steps(module, params, stamp, marker)
        record = write_record(module, params, stamp, started)
    finally:
        for leftover in (marker, owner):
            if os.path.exists(leftover):
                os.remove(leftover)
    module.exit_json(changed=True, wheel=os.path.join(params["dist"], record["wheel"]), torch=record["torch"],
                     stopped_earlier_build=stopped, adopted_earlier_build=False, seconds=record["seconds"])


if __name__ == "__main__":
    main()
