"""Every bad-input case of site.yml's roles stops in the preflight play of one run on a fresh host.

One fresh container, a few dozen inventory hosts (all pointing at that container) plus one valid host,
one `site.yml` run: every case's message, starting with its variable, must be among its host's
problems, the valid host must be stopped with them (one bad host stops the run everywhere), nothing
may report a change, no play after the preflight may start, and the container must be as it was.

The preflight reports every problem a host has, so cases share a host where they cannot mask each
other (disjoint variables, each caught by a different rule; argument spec cases apart, since a spec
problem stops the rules). That keeps the run to about 35 hosts instead of one per case. Each case
alone is refused by the same rules in tests/unit/plugins/module_utils/test_input_rules.py.

Once every rule of a host holds, the host must reach the source of each model it has still to place: the valid
host's hub (the hub stand-in) answers; one more host, valid but for a hub where nothing listens, is refused,
naming the model, on a host where nothing was installed yet.
"""

from __future__ import annotations

import json
import re
import sys
import time

import pytest

from harness import NATIVE, REPO_ROOT, Container, playbook_command
from harness.namespaces import container_process
from stand_ins.hub_server import HubProcess, hub_repository
from stand_ins.s3_origin import free_port

sys.path.insert(0, str(REPO_ROOT / "tests" / "unit"))
from bad_inputs import CASES, SECRET, TAKEN_PORT, VALID  # noqa: E402
import input_rules_doc  # noqa: E402

SITE = str(REPO_ROOT / "playbooks" / "site.yml")
CHECK_TASK = "Check every role's variables and the host"
HUB_COMMIT = VALID["vllm_model_models"][0]["revision"]


@pytest.fixture(scope="module")
def fresh_host():
    # What the host answers for the listener cases (input_rules_doc.bad_inputs_ports): the kernel's default
    # unprivileged port floor, and a process that is none of ours listening on bad_inputs.TAKEN_PORT.
    container = Container("localhost/arm-inference/debian12-%s:latest" % NATIVE, systemd=False,
                          options=("--sysctl", "net.ipv4.ip_unprivileged_port_start=1024"))
    container.exec("setsid python3 -c 'import socket, time; s = socket.socket(); s.bind((\"0.0.0.0\", %d)); "
                   "s.listen(); time.sleep(86400)' >/dev/null 2>&1 < /dev/null &" % TAKEN_PORT)
    listening = ":%04X " % TAKEN_PORT
    for dummy in range(50):
        if listening in container.exec("cat /proc/net/tcp").stdout:
            break
        time.sleep(0.1)
    yield container
    container.remove()


def pack(cases):
    """Hosts as lists of cases that cannot mask each other: argument spec cases apart from rule cases
    (a spec problem stops the rules), one case per rule, and no case setting a variable that another
    case's rule on the same host reads."""
    dummy, dummy, input_rules = input_rules_doc.imports()
    reads = {"%s()" % rule.__name__: set(re.findall(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+", names))
             for rules in input_rules.RULES.values() for rule, names, dummy in rules}
    unit_host = input_rules_doc.debian12_altra()
    hosts = []
    for case in cases:
        variables, expected = case
        where = next(where for where, line in input_rules_doc.problems(dict(VALID, **variables), unit_host)
                     if line.startswith(expected + ":"))
        spec = where == "argument spec"
        read = reads.get(where, set()) | set(variables)
        for host in hosts:
            if host["spec"] == spec and where not in host["rules"] and not host["variables"] & read \
                    and not host["reads"] & set(variables):
                break
        else:
            host = {"spec": spec, "variables": set(), "reads": set(), "rules": set(), "cases": []}
            hosts.append(host)
        host["variables"] |= set(variables)
        host["reads"] |= read
        if not spec:
            host["rules"].add(where)
        host["cases"].append(case)
    return [host["cases"] for host in hosts]


def test_every_case_stops_in_preflight_on_a_fresh_host(fresh_host, tmp_path):
    import subprocess

    before = fresh_host.state()
    groups = pack(CASES)
    names = ["cases-%02d" % index for index in range(len(groups))]
    host_vars = {}
    for name, group in zip(names, groups):
        host_vars[name] = dict(VALID, ansible_host=fresh_host.name)
        for variables, dummy in group:
            host_vars[name].update(variables)
    # Once every rule holds, the host must reach its model's source: the valid host's hub answers (the hub stand-in,
    # the real hub being unreachable here), the other host's does not (nothing listens on that port there).
    root = tmp_path / "hub"
    hub_repository(root, "org/tiny", {"main": HUB_COMMIT}, seed=3)
    # In the container's network namespace (its loopback is its own: the cases need its port floor and listener).
    hub = HubProcess(root, prefix=["nsenter", "-t", str(container_process(fresh_host.name)[0]), "-n"]).start()
    [model] = VALID["vllm_model_models"]
    host_vars["valid"] = dict(VALID, ansible_host=fresh_host.name,
                              vllm_model_models=[dict(model, endpoint=hub.endpoint)])
    unreachable = "http://127.0.0.1:%d" % free_port()
    host_vars["unreachable"] = dict(VALID, ansible_host=fresh_host.name,
                                    vllm_model_models=[dict(model, endpoint=unreachable)])
    hosts = [type("Alias", (), {"name": name}) for name in host_vars]
    command, env = playbook_command(hosts, tmp_path, SITE, {}, options=("--forks", "20"), host_vars=host_vars)
    env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.posix.json"
    try:
        run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    finally:
        hub.stop()
    assert run.returncode != 0, run.stdout[-3000:]
    assert SECRET not in run.stdout + run.stderr
    assert run.stdout.startswith("{"), run.stderr[-3000:]
    report = json.loads(run.stdout)
    (tmp_path / "report.json").write_text(run.stdout)

    assert [play["play"]["name"] for play in report["plays"]] == ["Validate the inventory"]
    assert all(stats["changed"] == 0 for stats in report["stats"].values()), report["stats"]
    [check] = [task for task in report["plays"][0]["tasks"] if task["task"]["name"].endswith(CHECK_TASK)]
    results = check["hosts"]
    assert not results["valid"].get("failed"), results["valid"]
    assert results["valid"]["model_sources"] == {"tiny": "hub API"}, results["valid"]
    assert results["unreachable"].get("failed"), results["unreachable"]
    assert results["unreachable"]["msg"].startswith("vllm_model_models (tiny).endpoint: the hub at %s cannot be "
                                                    "reached from this host" % unreachable), results["unreachable"]
    refused = 0
    for name, group in zip(names, groups):
        result = results.get(name, {})
        lines = result.get("errors") or [result.get("msg", "")]
        assert result.get("failed"), "%s accepted: %r" % (name, group)
        assert all("\n" not in line for line in lines)
        for variables, expected in group:
            assert any(line.startswith(expected + ":") for line in lines), (variables, expected, lines)
            refused += 1
    assert refused == len(CASES) >= 60
    assert fresh_host.state() == before
    print("preflight matrix: %d cases on %d hosts refused in one site.yml run" % (refused, len(groups)))
