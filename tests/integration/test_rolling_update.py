"""rolling_update.yml on three native systemd containers that prepare.yml provisioned: all serve
the fixture vLLM v0.32.0 (tests/fixtures/vllm_source/README.md says what it stands in for). The
update to v0.32.1 reaches host 1 (healthy), then host 2, whose server is made unhealthy from 0.32.1
on (VLLM_FIXTURE_UNHEALTHY_FROM): host 2 is rolled back to its release and serve configuration and
the rollout stops, so host 3 never gets the update."""

from __future__ import annotations

import re

import pytest

from conftest import BUILD_SETUP, REPO_ROOT, prepared_host, run_playbook

SERVE = {
    "vllm_serve_model": "arm-inference/test-model",
    "vllm_serve_served_model_name": "test-model",
    "vllm_serve_instances": [{"name": "main", "kv_cache_gib": 1}],
    "vllm_serve_health_timeout": 20,
    "vllm_serve_restart_sec": 2,
    # The fixture's stand-in server answers /health and /v1/models, not chat completions.
    "vllm_rollout_smoke": False,
}
HEALTH = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8000/health', timeout=5).status)"


@pytest.fixture(scope="module")
def fleet(prepared_image):
    hosts = []
    try:
        for dummy in range(3):
            hosts.append(prepared_host(prepared_image))
        yield hosts
    finally:
        for host in hosts:
            host.remove()


def state(host):
    """(current release, MainPID of the server, what /health answers)."""
    release = host.exec("readlink /opt/vllm/current").stdout.strip()
    pid = host.exec("systemctl show -P MainPID vllm-serve-main").stdout.strip()
    health = host.exec("python3 -c \"%s\"" % HEALTH)
    return release, pid, health.stdout.strip() or health.stderr.strip()[-200:]


def test_a_host_that_fails_its_health_gate_is_rolled_back_and_stops_the_rollout(fleet, tmp_path):
    variables = dict(BUILD_SETUP, vllm_build_wheel_cache_dir=str(tmp_path / "wheels"), **SERVE)
    host_vars = {fleet[1].name: {"vllm_serve_environment": {"VLLM_FIXTURE_UNHEALTHY_FROM": "0.32.1"}}}

    def play(playbook, **extra):
        result = run_playbook(fleet, tmp_path, str(REPO_ROOT / "playbooks" / playbook), dict(variables, **extra),
                              host_vars=host_vars)
        return result, result.stdout + result.stderr

    for playbook in ("build.yml", "serve.yml"):
        result, output = play(playbook)
        assert result.returncode == 0, output[-3000:]
    before = [state(host) for host in fleet]
    assert all(release.startswith("releases/v0.32.0-") and health == "200" for release, dummy, health in before), before

    result, output = play("rolling_update.yml", vllm_build_git_ref="v0.32.1")
    assert result.returncode != 0, output[-3000:]
    assert "vllm_rollout: the update of %s failed" % fleet[1].name in output, output[-3000:]
    assert "The rollout stops here." in output
    after = [state(host) for host in fleet]

    # Batch 1: updated and healthy.
    assert after[0][0].startswith("releases/v0.32.1-") and after[0][2] == "200", after
    # Batch 2: back on its release, restarted onto it, healthy.
    assert after[1][0] == before[1][0] and after[1][2] == "200", after
    unit = fleet[1].exec("systemctl show -P ExecStart vllm-serve-main").stdout
    assert re.search(r"/opt/vllm/%s/venv/bin/python" % re.escape(before[1][0]), unit), unit
    history = fleet[1].exec("cat /opt/vllm/release-history").stdout
    assert "v0.32.1" in history, history  # it was switched, then switched back
    # Batch 3 never started: same release, same server process, nothing of v0.32.1 on it.
    assert after[2] == before[2], (before, after)
    assert fleet[2].exec("ls /opt/vllm/releases").stdout.split() == [before[2][0].split("/", 1)[1]]


def test_a_build_that_fails_mid_rollout_leaves_the_running_instances_alone(fleet, tmp_path):
    """After the first test: a ref that does not compile fails batch 1 in vllm_build; its release
    and server process stay as they were (nothing to restore), and no later host is touched."""
    before = [state(host) for host in fleet]
    variables = dict(BUILD_SETUP, vllm_build_wheel_cache_dir=str(tmp_path / "wheels"), vllm_build_git_ref="v0.32.2-broken",
                     **SERVE)
    result = run_playbook(fleet, tmp_path, str(REPO_ROOT / "playbooks" / "rolling_update.yml"), variables)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert "vllm_rollout: the update of %s failed" % fleet[0].name in output, output[-3000:]
    assert "fixture_undeclared_bias" in output, output[-3000:]
    assert [state(host) for host in fleet] == before
