"""Commands inside a local podman container through its namespaces (nsenter), as `podman exec` runs them, at a
fraction of the cost: on these 2-core runc/cgroup-v1 machines one `podman exec` takes 0.3-0.6 s of wall time and a
module needs three of them; nsenter takes a few milliseconds. Measured at stop 27: 31 tasks took 228 s through
containers.podman's connection and 42 s through this, on the same container under the same load.

The command gets what `podman exec` gives it: the container's mount, UTS, IPC, network and PID namespaces, root,
and the container's own environment (its PID 1's, which podman set from the image), nothing of the caller's.
Unlike `podman exec` it keeps the caller's cgroup and capabilities: the test containers are privileged or run
nothing that depends on either.
"""

from __future__ import annotations

import os
import subprocess
import tempfile

# The Ansible connection plugin that runs through this (connection_plugins/podman_nsenter.py), and its directory
# for ANSIBLE_CONNECTION_PLUGINS.
CONNECTION = "podman_nsenter"
CONNECTION_PLUGINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "connection_plugins")

# Where the PID of each container's first process is kept between calls (a playbook's every task runs in a
# process of its own), with the process's start time: the entry holds while /proc shows that same process.
_CACHE = os.path.join(tempfile.gettempdir(), "arm-inference-nsenter")


def _started(pid):
    """The start time of process `pid` (clock ticks since boot; with the PID it names one process)."""
    with open("/proc/%d/stat" % pid, encoding="utf-8") as stat:
        return stat.read().rsplit(")", 1)[1].split()[19]


def _environment(pid):
    with open("/proc/%d/environ" % pid, "rb") as environ:
        return [entry.decode("utf-8", "surrogateescape") for entry in environ.read().split(b"\0") if entry]


def _cached(name):
    """The cached PID of container `name` while it is still that process, else None."""
    try:
        with open(os.path.join(_CACHE, name), encoding="utf-8") as entry:
            pid, started = entry.read().split()
        return int(pid) if _started(int(pid)) == started else None
    except (OSError, ValueError, IndexError):
        return None


def container_process(name):
    """The PID (in this machine's namespace) of container `name`'s first process and its environment."""
    pid = _cached(name)
    if pid is None:
        inspect = subprocess.run(["podman", "inspect", "--type", "container", "--format", "{{.State.Pid}}", name],
                                 capture_output=True, text=True, check=False)
        if inspect.returncode != 0 or not inspect.stdout.strip().isdigit() or inspect.stdout.strip() == "0":
            raise RuntimeError("container %s is not running: %s" % (name, (inspect.stderr or inspect.stdout).strip()))
        pid = int(inspect.stdout)
        os.makedirs(_CACHE, mode=0o700, exist_ok=True)
        staged = os.path.join(_CACHE, ".%s.%d" % (name, os.getpid()))
        with open(staged, "w", encoding="utf-8") as entry:
            entry.write("%d %s\n" % (pid, _started(pid)))
        os.replace(staged, os.path.join(_CACHE, name))
    return pid, _environment(pid)


def in_environment(environment, argv):
    """argv with exactly `environment` (the container's), nothing of the caller's."""
    return ["env", "-i", *environment, *argv]


def enter_command(name, argv):
    """argv run inside container `name` as root, with the container's environment."""
    pid, environment = container_process(name)
    return ["nsenter", "--target", str(pid), "--mount", "--uts", "--ipc", "--net", "--pid", "--",
            *in_environment(environment, argv)]
