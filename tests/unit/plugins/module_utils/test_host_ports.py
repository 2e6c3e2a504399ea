"""What the host says about listeners before a change (module_utils/host_ports.py): /proc/net/tcp{,6}
as Linux prints them on a little-endian host, the service of a process from its cgroup file, and
which binds collide."""

from __future__ import annotations

import sys

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import host_ports

pytestmark = pytest.mark.skipif(sys.byteorder != "little", reason="the samples are a little-endian host's")

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000   998        0 41230 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2345 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F40 0100007F:C350 01 00000000:00000000 00:00000000 00000000   998        0 41299 1 0000000000000000 20 4 30 10 -1
"""
TCP6 = "\n".join([
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
    "tm->when retrnsmt   uid  timeout inode",
    "   0: 00000000000000000000000000000000:20FB 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000     0        0 5511 1 0000000000000000 100 0 0 10 0",
    "   1: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000  1000        0 5512 1 0000000000000000 100 0 0 10 0", ""])


def test_listening_sockets_are_read_with_their_addresses():
    assert host_ports.parse_proc_net_tcp(TCP) == [
        {"address": "127.0.0.1", "port": 8000, "uid": 998, "inode": 41230},
        {"address": "0.0.0.0", "port": 22, "uid": 0, "inode": 2345}]
    assert [(entry["address"], entry["port"]) for entry in host_ports.parse_proc_net_tcp(TCP6)] == [
        ("::", 8443), ("::1", 8080)]


@pytest.mark.parametrize("cgroup, service", [
    # cgroup v1 hybrid (this machine's), inside a podman container's own slice.
    ("12:pids:/machine.slice/libpod-1a2b.scope/system.slice/vllm-serve-main.service\n"
     "1:name=systemd:/machine.slice/libpod-1a2b.scope/system.slice/vllm-serve-main.service\n"
     "0::/system.slice/vllm-serve-main.service\n", "vllm-serve-main.service"),
    ("0::/system.slice/haproxy.service\n", "haproxy.service"),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", ""),
])
def test_the_service_of_a_process_comes_from_its_cgroup(cgroup, service):
    assert host_ports.service_of(cgroup) == service


PORTS = {"unprivileged_port_start": 1024, "addresses": {"10.9.9.9": "Cannot assign requested address"},
         "listening": [{"address": "127.0.0.1", "port": 8000, "uid": 998, "pid": 4121, "process": "python3",
                        "unit": "vllm-serve-main.service"},
                       {"address": "::", "port": 9180, "uid": 0, "pid": 77, "process": "node_exporter",
                        "unit": "prometheus-node-exporter.service"},
                       {"address": "0.0.0.0", "port": 9999, "uid": 1000, "pid": None, "process": "", "unit": ""}]}


def _ours(unit):
    return unit.startswith("vllm-serve-")


def test_a_privileged_port_is_refused_only_for_a_service_without_the_capability():
    [(what, problem, fix)] = host_ports.bind_problems("127.0.0.1", 80, PORTS, _ours, True, "vllm-serve")
    assert what == "port" and "below the host's net.ipv4.ip_unprivileged_port_start (1024)" in problem
    assert "1024 or more" in fix
    assert host_ports.bind_problems("0.0.0.0", 443, PORTS, _ours, False) == []
    assert host_ports.bind_problems("127.0.0.1", 80, dict(PORTS, unprivileged_port_start=0), _ours) == []


def test_a_port_held_by_another_process_is_refused_and_our_own_is_not():
    assert host_ports.bind_problems("127.0.0.1", 8000, PORTS, _ours) == []
    # The IPv6 wildcard takes IPv4 too (dual stack).
    [(what, problem, dummy)] = host_ports.bind_problems("127.0.0.1", 9180, PORTS, _ours)
    assert what == "port" and problem == ("port 9180 is already in use on :: by node_exporter (pid 77, "
                                          "prometheus-node-exporter.service)")
    [(dummy, problem, dummy)] = host_ports.bind_problems("127.0.0.1", 9999, PORTS, _ours)
    assert "could not see (uid 1000" in problem
    # IPv4's wildcard leaves IPv6 addresses alone.
    assert host_ports.bind_problems("::1", 9999, PORTS, _ours) == []
    # Another address, or the same address on a port nobody holds.
    assert host_ports.bind_problems("127.0.0.2", 8000, PORTS, lambda unit: False) == []
    assert host_ports.bind_problems("0.0.0.0", 8001, PORTS, _ours) == []


def test_an_address_that_is_not_the_hosts_is_refused():
    [(what, problem, dummy)] = host_ports.bind_problems("10.9.9.9", 8000, PORTS, lambda unit: False)
    assert what == "address" and problem == "cannot be bound on this host: Cannot assign requested address"


# /proc/1/limits and /proc/1/status (CapEff) of systemd as PID 1 in the harness's privileged Debian 12 container,
# started with --ulimit nofile=4096:4096 by a podman that lacks CAP_SYS_RESOURCE (bit 24 clear).
PID1_LIMITS = """\
Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            4096                 4096                 files
Max locked memory         8388608              8388608              bytes
"""
CONTAINER_STATUS = "Name:\tsystemd\nCapInh:\t0000000000000000\nCapEff:\t000001fffeffffff\nCapBnd:\t000001fffeffffff\n"
BOOTED_STATUS = "Name:\tsystemd\nCapEff:\t000001ffffffffff\n"


def test_a_service_gets_at_most_pid1s_hard_limit_without_cap_sys_resource():
    assert host_ports.hard_open_files(PID1_LIMITS) == 4096
    assert not host_ports.has_capability(CONTAINER_STATUS, host_ports.CAP_SYS_RESOURCE)
    assert host_ports.service_open_files(PID1_LIMITS, CONTAINER_STATUS, "1048576\n") == 4096


def test_with_cap_sys_resource_a_service_gets_up_to_fs_nr_open():
    assert host_ports.has_capability(BOOTED_STATUS, host_ports.CAP_SYS_RESOURCE)
    assert host_ports.service_open_files(PID1_LIMITS, BOOTED_STATUS, "2097152\n") == 2097152
    # fs.nr_open unreadable: Linux's default.
    assert host_ports.service_open_files(PID1_LIMITS, BOOTED_STATUS, "") == host_ports.DEFAULT_NR_OPEN
    # A hard limit above fs.nr_open (raised before fs.nr_open was lowered) is what PID 1 can still give.
    assert host_ports.service_open_files(PID1_LIMITS.replace("4096 ", "4194304 "), BOOTED_STATUS, "1048576") == 4194304


def test_unreadable_limits_are_unknown_not_zero():
    assert host_ports.service_open_files("", CONTAINER_STATUS, "1048576") is None
    assert host_ports.service_open_files(PID1_LIMITS, "", "") == 4096
    assert not host_ports.has_capability("CapEff:\tzz\n", host_ports.CAP_SYS_RESOURCE)
