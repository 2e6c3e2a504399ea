# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host says, read on the host: the answers of the modules host_facts, host_ports, package_candidates and
vllm_model_info, written once here so that host_survey can give any of them in one module run (the input_check
action asks for all a check needs at once) and each of those modules gives its own."""

from __future__ import annotations

import fcntl
import ipaddress
import os
import socket
import time

from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts, free_bytes, read_snapshot
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_ports import (
    DEFAULT_UNPRIVILEGED_PORT_START,
    parse_proc_net_tcp,
    service_of,
    service_open_files,
)
from ansible_collections.arm_inference.vllm.plugins.module_utils.package_candidates import (
    apt_lists_age,
    not_installed,
    parse_apt_policy,
    parse_dpkg_installed,
    parse_rpm_query,
    summarize,
)
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_model_info import ModelInfoError, read_model_dir
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_tuning import build_class, max_jobs


class PackageQueryError(RuntimeError):
    """The package manager could not answer (its message)."""


def host_facts(build_gib_per_job=2.0, free_space_paths=()):
    """host_facts' answer: {"facts": the host's description, "free_bytes": {path: bytes}}. Raises HostFactsError or
    TuningError."""
    try:
        affinity = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    facts = build_host_facts(read_snapshot(affinity=affinity))
    facts["build_class"] = build_class(facts)
    facts["build_max_jobs"] = max_jobs(facts, build_gib_per_job, per_job_variable="build_gib_per_job")
    return {"facts": facts, "free_bytes": dict((path, free_bytes(path)) for path in free_space_paths)}


# host_ports

def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


def _holders(inodes):
    """{socket inode: (pid, process name, systemd service)} for the processes we may look into."""
    found = {}
    for pid in (name for name in os.listdir("/proc") if name.isdigit()):
        try:
            links = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for link in links:
            try:
                target = os.readlink("/proc/%s/fd/%s" % (pid, link))
            except OSError:
                continue
            if target.startswith("socket:[") and int(target[8:-1]) in inodes and int(target[8:-1]) not in found:
                found[int(target[8:-1])] = (int(pid), _read("/proc/%s/comm" % pid).strip(),
                                            service_of(_read("/proc/%s/cgroup" % pid)))
    return found


def _unusable(address):
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((address, 0))
        return ""
    except OSError as error:
        return error.strerror or str(error)
    finally:
        sock.close()


def ports(addresses):
    """host_ports' answer: the lowest unprivileged port, the listeners with their holders, the addresses that cannot
    be bound, and the open files a service can get."""
    start = _read("/proc/sys/net/ipv4/ip_unprivileged_port_start").strip()
    listening = parse_proc_net_tcp(_read("/proc/net/tcp")) + parse_proc_net_tcp(_read("/proc/net/tcp6"))
    holders = _holders({entry["inode"] for entry in listening})
    for entry in listening:
        pid, process, unit = holders.get(entry.pop("inode"), (None, "", ""))
        entry.update(pid=pid, process=process, unit=unit)
    unusable = {}
    for address in addresses:
        try:
            problem = _unusable(address)
        except ValueError:
            continue
        if problem:
            unusable[address] = problem
    return {"listening": listening, "addresses": unusable,
            "unprivileged_port_start": int(start) if start.isdigit() else DEFAULT_UNPRIVILEGED_PORT_START,
            "service_open_files": service_open_files(_read("/proc/1/limits"), _read("/proc/1/status"),
                                                     _read("/proc/sys/fs/nr_open"))}


# package_candidates

APT_LISTS = "/var/lib/apt/lists"
RPM_FORMAT = "%{name}\t%{evr}\n"


def _tool(module, name):
    """The package manager's program `name`; raises PackageQueryError when the host has none (a microdnf-only image),
    so that the answer says so instead of failing the survey."""
    path = module.get_bin_path(name)
    if not path:
        raise PackageQueryError("%s is not on this host" % name)
    return path


def _lock_apt_lists(exclusive):
    """A lock on apt's lists directory among this module's runs on the host (released when the
    descriptor closes); None when there is no such directory."""
    try:
        descriptor = os.open(APT_LISTS, os.O_RDONLY)
    except OSError:
        return None
    fcntl.flock(descriptor, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    return descriptor


def _refresh_apt(module, valid_time):
    if valid_time <= 0:
        return False
    # Decided under the lock: a run that waited for another's refresh finds the lists fresh.
    age = apt_lists_age(APT_LISTS, time.time())
    if age is not None and age < valid_time:
        return False
    apt_get = _tool(module, "apt-get")
    rc, dummy_out, err = module.run_command([apt_get, "update", "-q"], environ_update={"LANG": "C", "LC_ALL": "C"})
    if rc != 0:
        raise PackageQueryError("apt-get update failed: %s" % err.strip())
    return True


def _installed_dpkg(module, names):
    dpkg_query = _tool(module, "dpkg-query")
    # dpkg-query exits 1 when a name is unknown to dpkg; its stdout still lists the known ones.
    dummy_rc, out, dummy_err = module.run_command(
        [dpkg_query, "-W", "-f", "${Package}\t${Version}\t${db:Status-Status}\n"] + names,
        environ_update={"LANG": "C", "LC_ALL": "C"},
    )
    return parse_dpkg_installed(out)


def _installed_rpm(module, names):
    rpm = _tool(module, "rpm")
    # rpm -q exits non-zero when any name is not installed; its stdout still lists the installed ones.
    dummy_rc, out, dummy_err = module.run_command([rpm, "-q", "--queryformat", RPM_FORMAT] + names)
    return parse_rpm_query("\n".join(line for line in out.splitlines() if "\t" in line))


def _candidates_apt(module, names):
    apt_cache = _tool(module, "apt-cache")
    rc, out, err = module.run_command([apt_cache, "policy"] + names, environ_update={"LANG": "C", "LC_ALL": "C"})
    if rc != 0:
        raise PackageQueryError("apt-cache policy failed: %s" % err.strip())
    return {name: info["candidate"] for name, info in parse_apt_policy(out).items()}


def _candidates_dnf(module, names):
    dnf = _tool(module, "dnf")
    rc, out, err = module.run_command([dnf, "-q", "repoquery", "--latest-limit=1", "--queryformat", RPM_FORMAT] + names)
    if rc != 0:
        raise PackageQueryError("dnf repoquery failed: %s" % err.strip())
    return parse_rpm_query(out)


def packages(module, names, manager="auto", cache_valid_time=0):
    """package_candidates' answer for `names`: which are installed, which the sources have (apt's lists refreshed
    first when older than cache_valid_time seconds and a name is missing). Raises PackageQueryError when the package
    manager fails."""
    names = [name for name in names if name]
    if manager == "auto":
        manager = "apt" if module.get_bin_path("apt-cache") else "dnf"
    if not names:
        return {"packages": {}, "missing": [], "manager": manager, "cache_updated": False}
    # The local package database answers for what is installed; the repositories (slow to ask,
    # and a list refresh slower still) are only consulted for the rest, so a re-run asks nothing.
    installed = (_installed_dpkg if manager == "apt" else _installed_rpm)(module, names)
    pending = not_installed(names, installed)
    cache_updated = False
    candidates = {}
    answer = {}
    if pending and manager == "apt":
        lock = _lock_apt_lists(exclusive=cache_valid_time > 0)
        try:
            cache_updated = _refresh_apt(module, cache_valid_time)
            if lock is not None:
                fcntl.flock(lock, fcntl.LOCK_SH)  # the queries of other runs go on beside this one
            candidates = _candidates_apt(module, pending)
            answer["lists_age"] = apt_lists_age(APT_LISTS, time.time())
        finally:
            if lock is not None:
                os.close(lock)
    elif pending:
        candidates = _candidates_dnf(module, pending)
    found, missing = summarize(names, candidates, installed)
    return dict(answer, packages=found, missing=missing, manager=manager, cache_updated=cache_updated)


def model_info(paths):
    """vllm_model_info's answer: {"models": {path: summary}, "errors": {path: why not}}."""
    models, errors = {}, {}
    for path in paths:
        if not path.startswith("/"):
            errors[path] = "%s is not an absolute path." % path
            continue
        try:
            models[path] = read_model_dir(path)
        except (ModelInfoError, OSError) as error:
            errors[path] = str(error)
    return {"models": models, "errors": errors}
