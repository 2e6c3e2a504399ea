"""Verify the vllm_serve role on the aarch64 container, serving the vllm_build release of the fixture
vLLM tree, whose server stands in for the real one (tests/fixtures/vllm_source/README.md): the unit's hardening, environment, tcmalloc
preload, CPU binding, API key handling and lifecycle under a real systemd."""

from __future__ import annotations

import json
import os
import shlex
import time

import test_site
from serve_checks import only_in_scenario, places_without_the_key

testinfra_hosts = test_site.testinfra_hosts  # the same podman:// instances as the site tests

pytestmark = only_in_scenario("site", "only the site scenario builds and serves the fixture vLLM")

UNIT = "vllm-serve-main.service"
KEY_FILE = "/etc/vllm-serve/api_key"
PROBE = r"""
import json, sys, urllib.request, urllib.error
url = sys.argv[1]
key = open(sys.argv[2]).read().strip() if len(sys.argv) > 2 else None
request = urllib.request.Request(url, headers={"Authorization": "Bearer " + key} if key else {})
try:
    with urllib.request.urlopen(request, timeout=10) as response:
        print(response.status, response.read().decode())
except urllib.error.HTTPError as error:
    print(error.code, "")
"""


def _get(host, path, key=None):
    # The probe reads the key file itself: no key on any command line, not even in the tests.
    command = "python3 -c %s http://127.0.0.1:8000%s" % (shlex.quote(PROBE), path)
    if key:
        command += " " + KEY_FILE
    status, dummy, body = host.check_output(command).partition(" ")
    return int(status), body


def _main_pid(host):
    return int(host.check_output("systemctl show -P MainPID %s" % UNIT))


def _wait_active(host, old_pid=None, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = host.check_output("systemctl show -P ActiveState %s" % UNIT)
        pid = _main_pid(host)
        if state == "active" and pid and pid != old_pid and _health(host):
            return pid
        time.sleep(2)
    raise AssertionError("%s did not come back: %s" % (UNIT, host.run("systemctl status %s" % UNIT).stdout))


def _health(host):
    try:
        return _get(host, "/health")[0] == 200
    except AssertionError:
        return False


def test_unit_runs_as_the_service_user_with_hardening(host):
    props = dict(line.split("=", 1) for line in host.check_output(
        "systemctl show -p ActiveState,User,MemoryDenyWriteExecute,NoNewPrivileges,ProtectSystem,PrivateTmp,"
        "Restart,StartLimitBurst %s" % UNIT).splitlines())
    assert props["ActiveState"] == "active"
    assert props["User"] == "vllm-serve"
    # oneDNN's JIT needs it off; this test keeps anyone from "hardening" it on.
    assert props["MemoryDenyWriteExecute"] == "no"
    assert props["NoNewPrivileges"] == "yes" and props["ProtectSystem"] == "strict" and props["PrivateTmp"] == "yes"
    assert props["Restart"] == "on-failure" and props["StartLimitBurst"] == "3"
    status = host.check_output("cat /proc/%d/status" % _main_pid(host))
    assert "NoNewPrivs:\t1" in status
    # qemu-user does not hand a guest's seccomp filter to the kernel (Seccomp: 0 here), so
    # SystemCallFilter= is configured but not enforced under emulation; the native engine scenario
    # checks that the filter is in force.
    if host.check_output("uname -m") == os.uname().machine:
        assert "Seccomp:\t2" in status
    user = host.user("vllm-serve")
    assert user.shell == "/usr/sbin/nologin" and user.uid < 1000
    for directory in ("/var/lib/vllm-serve/main", "/var/cache/vllm-serve/main"):
        assert host.file(directory).mode == 0o700 and host.file(directory).user == "vllm-serve"
    # Transport "file" here (systemd credentials do not work under qemu-user): root-owned, read
    # by the service group only.
    key = host.file(KEY_FILE)
    assert key.user == "root" and key.group == "vllm-serve" and key.mode == 0o640


def test_process_has_the_computed_environment_tcmalloc_and_cpu_binding(host):
    pid = _main_pid(host)
    expected = {}
    for line in host.check_output("cat /etc/vllm-serve/main.env").splitlines():
        if line and not line.startswith("#"):
            key, dummy, value = line.partition("=")
            expected[key] = json.loads(value)
    environ = dict(item.split("=", 1) for item in
                   host.check_output("tr '\\0' '\\n' < /proc/%d/environ" % pid).splitlines() if "=" in item)
    for key in ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU", "LD_PRELOAD",
                "HF_HUB_OFFLINE", "VLLM_NO_USAGE_STATS"):
        assert environ.get(key) == expected[key], key
    # The KV size is an argument (vLLM 0.32 reads --kv-cache-memory-bytes on CPU); the legacy variable
    # would override it, so it is never set.
    assert "VLLM_CPU_KVCACHE_SPACE" not in environ
    arguments = host.check_output("tr '\\0' '\\n' < /proc/%d/cmdline" % pid).splitlines()
    assert arguments[arguments.index("--kv-cache-memory-bytes") + 1] == str(2 * 1024 ** 3)
    # Under qemu-user the CPU reports the host's x86 flags, so no bf16 is claimed and no fpmath is set.
    assert "ONEDNN_DEFAULT_FPMATH_MODE" not in environ
    assert "libtcmalloc" in host.check_output("cat /proc/%d/maps" % pid)
    nproc = int(host.check_output("nproc --all"))
    bind = expected["VLLM_CPU_OMP_THREADS_BIND"]
    assert bind == ("0-%d" % (nproc - 2) if nproc > 2 else "0")
    threads = host.check_output("grep -h Cpus_allowed_list /proc/%d/task/*/status" % pid).splitlines()
    assert "Cpus_allowed_list:\t%s" % bind in threads, threads
    affinity = host.check_output("systemctl show -P CPUAffinity %s" % UNIT)
    assert affinity.replace(" ", ",") in ("0-%d" % (nproc - 1), ",".join(str(cpu) for cpu in range(nproc)))


def test_api_key_guards_v1_and_never_leaks(host):
    assert _get(host, "/health")[0] == 200
    assert _get(host, "/v1/models")[0] == 401
    status, body = _get(host, "/v1/models", key=True)
    assert status == 200 and json.loads(body)["data"][0]["id"] == "test-model"
    key = host.check_output("cat %s" % KEY_FILE)
    assert len(key) > 8
    pid = _main_pid(host)
    cmdline = host.check_output("tr '\\0' ' ' < /proc/%d/cmdline" % pid)
    assert "--model arm-inference/test-model" in cmdline
    texts = dict(places_without_the_key(host, UNIT), cmdline=cmdline,
                 environ=host.check_output("tr '\\0' '\\n' < /proc/%d/environ" % pid))
    for where, text in texts.items():
        assert key not in text, where


def test_killed_server_is_restarted(host):
    old = _main_pid(host)
    host.run_expect([0], "kill -9 %d" % old)
    new = _wait_active(host, old_pid=old)
    assert new != old


def test_missing_credential_fails_closed_and_the_crash_loop_ends_in_failed(host):
    """Without its key the launcher refuses to serve unauthenticated; systemd retries, then gives up
    and leaves the unit failed instead of restarting forever."""
    dropin = "/run/systemd/system/%s.d" % UNIT
    restarts_before = int(host.check_output("systemctl show -P NRestarts %s" % UNIT))
    # A later EnvironmentFile= overrides the role's: the key file now points nowhere.
    host.run_expect([0], "mkdir -p %s && echo ARM_INFERENCE_API_KEY_FILE=/nonexistent > /run/no-key.env && "
                         "printf '[Service]\\nEnvironmentFile=/run/no-key.env\\n' > %s/no-key.conf && "
                         "systemctl daemon-reload && systemctl restart %s" % (dropin, dropin, UNIT))
    try:
        deadline = time.time() + 120
        while time.time() < deadline and host.check_output("systemctl show -P ActiveState %s" % UNIT) != "failed":
            time.sleep(2)
        assert host.check_output("systemctl show -P ActiveState %s" % UNIT) == "failed"
        # Burst 3: the first start and two restarts, then systemd gives up (systemd 252 keeps
        # Result=exit-code and logs the start limit).
        assert int(host.check_output("systemctl show -P NRestarts %s" % UNIT)) - restarts_before == 2
        journal = host.check_output("journalctl --no-pager -n 40 -u %s" % UNIT)
        assert "refusing to start unauthenticated" in journal
        assert "Start request repeated too quickly" in journal
    finally:
        host.run_expect([0], "rm -rf %s /run/no-key.env && systemctl daemon-reload && systemctl reset-failed %s && systemctl start %s"
                        % (dropin, UNIT, UNIT))
    _wait_active(host)
