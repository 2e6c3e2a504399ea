# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host can say, before anything changes, about the TCP listeners the roles would open.

The host_ports module reads the host (its lowest unprivileged port, its listening sockets with the
process and systemd unit that hold each, whether each address the roles would bind is the host's, and
how many descriptors its service manager can give a service); input_rules asks bind_problems() whether
a service could listen on an address and port there.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import struct

LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
# Linux's default when /proc/sys/net/ipv4/ip_unprivileged_port_start is missing (kernels before 4.11).
DEFAULT_UNPRIVILEGED_PORT_START = 1024
SERVICE_IN_CGROUP = re.compile(r"/([^/]+\.service)(?:/|$)")
# Linux's fs.nr_open when /proc/sys/fs/nr_open cannot be read: the most descriptors a process may be given.
DEFAULT_NR_OPEN = 1048576
CAP_SYS_RESOURCE = 24  # its bit in /proc/<pid>/status's CapEff


def _address(hex_text):
    """An address as /proc/net/tcp{,6} prints it: 32-bit words in the host's byte order."""
    words = [int(hex_text[index:index + 8], 16) for index in range(0, len(hex_text), 8)]
    packed = b"".join(struct.pack("=I", word) for word in words)
    return socket.inet_ntop(socket.AF_INET if len(packed) == 4 else socket.AF_INET6, packed)


def parse_proc_net_tcp(text):
    """[{address, port, inode, uid}] of the listening sockets in /proc/net/tcp or /proc/net/tcp6."""
    found = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN:
            continue
        address, port = fields[1].split(":")
        found.append({"address": _address(address), "port": int(port, 16), "uid": int(fields[7]),
                      "inode": int(fields[9])})
    return found


def service_of(cgroup_text):
    """The systemd service a process runs in, from /proc/<pid>/cgroup ("" when none)."""
    for line in cgroup_text.splitlines():
        matches = SERVICE_IN_CGROUP.findall(line.split(":", 2)[-1])
        if matches:
            return matches[-1]
    return ""


def _overlap(wanted, held):
    """Whether a bind of `wanted` collides with a listener on `held` (same port): the same address,
    either one the wildcard of its family, or the IPv6 wildcard (dual stack by default) for IPv4."""
    wanted, held = ipaddress.ip_address(wanted), ipaddress.ip_address(held)
    if wanted == held:
        return True
    if wanted.version == held.version:
        return wanted.is_unspecified or held.is_unspecified
    return (wanted.version == 6 and wanted.is_unspecified) or (held.version == 6 and held.is_unspecified)


def holder(entry):
    """Who holds a listener, in words."""
    if entry.get("pid"):
        return "%s (pid %s%s)" % (entry.get("process") or "?", entry["pid"],
                                  ", %s" % entry["unit"] if entry.get("unit") else "")
    return "a process this check could not see (uid %s; run the check as root)" % entry.get("uid")


def bind_problems(address, port, ports, ours, needs_unprivileged=True, service="the service"):
    """[(what, problem, fix)] for a service that would listen on address:port, from the host's `ports`
    (the host_ports module's answer); [] when it can.

    ours(unit) says whether a listener's systemd unit is one the run restarts or reconfigures anyway
    (its own instances, the gateway); needs_unprivileged: the service has no CAP_NET_BIND_SERVICE.
    what: "port" or "address", the setting the problem is about."""
    problems = []
    start = ports.get("unprivileged_port_start", DEFAULT_UNPRIVILEGED_PORT_START)
    if needs_unprivileged and port < start:
        problems.append((
            "port", "is below the host's net.ipv4.ip_unprivileged_port_start (%d), and %s runs without "
            "CAP_NET_BIND_SERVICE, so it could not bind port %d" % (start, service, port),
            "pick a port of %d or more (put vllm_gateway in front for a low port)" % start))
    unusable = (ports.get("addresses") or {}).get(str(address))
    if unusable:
        return problems + [("address", "cannot be bound on this host: %s" % unusable,
                            "give 127.0.0.1, 0.0.0.0 or one of the host's own addresses")]
    for entry in ports.get("listening") or ():
        if entry["port"] == port and _overlap(address, entry["address"]) and not ours(entry.get("unit") or ""):
            problems.append(("port", "port %d is already in use on %s by %s" % (port, entry["address"], holder(entry)),
                             "stop that process or pick a free port"))
            break
    return problems


def hard_open_files(limits_text):
    """The hard "Max open files" limit in /proc/<pid>/limits (None when absent; "unlimited" as None too,
    which Linux never shows for open files)."""
    for line in limits_text.splitlines():
        if line.startswith("Max open files"):
            fields = line[len("Max open files"):].split()
            return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
    return None


def has_capability(status_text, bit):
    """Whether /proc/<pid>/status's CapEff holds capability `bit`."""
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            try:
                return bool(int(line.split(":", 1)[1].strip(), 16) >> bit & 1)
            except ValueError:
                return False
    return False


def service_open_files(pid1_limits, pid1_status, nr_open_text=""):
    """The most open files systemd (PID 1) can give a service's LimitNOFILE=, or None when it cannot be read.

    systemd sets a unit's limits in the process it forks for the service (as PID 1, with PID 1's limits and
    capabilities) and, when the kernel refuses one, sets the closest it may instead (setrlimit_closest: the
    hard limit PID 1 has) without failing the unit or logging it; the service then finds fewer than it
    asked for. A process may raise its hard limit only with CAP_SYS_RESOURCE, and then up to fs.nr_open.
    Where systemd boots the machine PID 1 has CAP_SYS_RESOURCE, so the figure is fs.nr_open; in a container
    without CAP_SYS_RESOURCE it is the hard limit the container was started with (--ulimit nofile).
    """
    hard = hard_open_files(pid1_limits)
    if hard is None:
        return None
    if has_capability(pid1_status, CAP_SYS_RESOURCE):
        nr_open = nr_open_text.strip()
        return max(hard, int(nr_open) if nr_open.isdigit() else DEFAULT_NR_OPEN)
    return hard
