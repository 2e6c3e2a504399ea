"""rolling_update scenario: update three hosts serving fixture vLLM v0.32.0 to v0.32.1 while the
second one (serial order) fails its health gate. Host 1 is updated and healthy, host 2 is rolled
back to its release and serves again, the rollout stops and host 3 keeps its server untouched.
Then an update to a ref that does not compile fails in batch 1 and touches nobody's server."""

from __future__ import annotations

import re

import pytest
import testinfra

import test_site
from serve_checks import only_in_scenario, run_playbook

pytestmark = only_in_scenario("rolling_update", "only the rolling_update scenario rolls an update out")

HEALTH = "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:8000/health', timeout=5).status)\""


def state(host):
    """(current release, MainPID of the server, what /health answers)."""
    health = host.run(HEALTH)
    return (host.check_output("readlink /opt/vllm/current"), host.check_output("systemctl show -P MainPID vllm-serve-main"),
            health.stdout.strip() or health.stderr.strip()[-200:])


@pytest.fixture(scope="module")
def rollout():
    # Serial order is inventory order: rolling-1, rolling-2, rolling-3.
    fleet = [testinfra.get_host(address) for address in test_site._podman_hosts()]  # pylint: disable=protected-access
    before = [state(host) for host in fleet]
    assert all(release.startswith("releases/v0.32.0-") and health == "200" for release, dummy, health in before), before
    returncode, output = run_playbook("arm_inference.vllm.rolling_update", "vllm_build_git_ref=v0.32.1")
    return fleet, before, returncode, output, [state(host) for host in fleet], [rotation(host) for host in fleet]


def rotation(host):
    """What the scenario's balancer hooks (molecule/rolling_update/rotation) recorded, in order."""
    return host.run("cat /var/tmp/arm-inference-rotation.log").stdout.split("\n")[:-1]


def test_the_rollout_fails_at_host_2_and_says_it_stops(rollout):
    dummy, dummy, returncode, output, dummy, dummy = rollout
    assert returncode != 0, output[-3000:]
    assert "vllm_rollout: the update of rolling-2 failed" in output, output[-3000:]
    assert "The rollout stops here." in output, output[-3000:]


def test_host_1_is_updated_and_healthy(rollout):
    dummy, dummy, dummy, dummy, after, dummy = rollout
    assert after[0][0].startswith("releases/v0.32.1-") and after[0][2] == "200", after


def test_host_2_is_back_on_its_release_and_healthy(rollout):
    fleet, before, dummy, dummy, after, dummy = rollout
    assert after[1][0] == before[1][0] and after[1][2] == "200", (before, after)
    unit = fleet[1].check_output("systemctl show -P ExecStart vllm-serve-main")
    assert re.search(r"/opt/vllm/%s/venv/bin/python" % re.escape(before[1][0]), unit), unit
    # It was switched to v0.32.1, then back.
    assert "v0.32.1" in fleet[1].check_output("cat /opt/vllm/release-history")


def test_host_3_never_got_the_update(rollout):
    fleet, before, dummy, dummy, after, dummy = rollout
    # Same release, same server process, healthy, and nothing of v0.32.1 on it.
    assert after[2] == before[2], (before, after)
    assert fleet[2].check_output("ls /opt/vllm/releases").split() == [before[2][0].split("/", 1)[1]]


def test_the_balancer_hooks_run_around_each_host_it_reached(rollout):
    """Host 1 left and rejoined on the new release, host 2 left and rejoined once rolled back, host 3 was
    never taken out of the rotation."""
    dummy, before, dummy, dummy, after, rotations = rollout
    assert rotations[0] == ["left " + before[0][0], "joined " + after[0][0]], rotations
    assert rotations[1] == ["left " + before[1][0], "joined " + before[1][0]], rotations
    assert rotations[2] == [], rotations


def test_every_gateway_answers_health_after_the_rollout(rollout):
    for host in rollout[0]:
        assert host.check_output("python3 -c \"import ssl, urllib.request as u; print(u.urlopen("
                                 "'https://127.0.0.1:8443/health', context=ssl._create_unverified_context(), "
                                 "timeout=5).status)\"") == "200"


def test_a_ref_that_does_not_compile_stops_the_rollout_at_host_1_and_touches_no_server(rollout):
    """Runs after the rollout above (pytest keeps file order): whatever each host serves now, an update
    whose build fails on host 1 leaves every release and server process as it was (nothing to restore)."""
    fleet = rollout[0]
    before = [state(host) for host in fleet]
    assert all(health == "200" for dummy, dummy, health in before), before
    returncode, output = run_playbook("arm_inference.vllm.rolling_update", "vllm_build_git_ref=v0.32.2-broken")
    assert returncode != 0, output[-3000:]
    assert "vllm_rollout: the update of rolling-1 failed" in output, output[-3000:]
    assert "fixture_undeclared_bias" in output, output[-3000:]
    assert [state(host) for host in fleet] == before
