"""rolling_update.yml on three native systemd containers that prepare.yml provisioned, all serving
the fixture vLLM v0.32.0 (tests/fixtures/vllm_source/README.md says what it stands in for): an
update to a ref that does not compile fails in batch 1 and touches nobody's server. The failed
health gate (a host rolled back, the rollout stopped) is the molecule scenario rolling_update's."""

from __future__ import annotations

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
def fleet(prepared_image, tmp_path_factory):
    """Three hosts serving v0.32.0, built once (the controller's wheel cache is shared)."""
    hosts = []
    try:
        for dummy in range(3):
            hosts.append(prepared_host(prepared_image))
        tmp_path = tmp_path_factory.mktemp("fleet")
        variables = dict(BUILD_SETUP, vllm_build_wheel_cache_dir=str(tmp_path / "wheels"), **SERVE)
        for playbook in ("build.yml", "serve.yml"):
            result = run_playbook(hosts, tmp_path, str(REPO_ROOT / "playbooks" / playbook), variables)
            assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
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


def test_a_build_that_fails_mid_rollout_leaves_the_running_instances_alone(fleet, tmp_path):
    """A ref that does not compile fails batch 1 in vllm_build; its release and server process stay
    as they were (nothing to restore), and no later host is touched."""
    before = [state(host) for host in fleet]
    assert all(release.startswith("releases/v0.32.0-") and health == "200" for release, dummy, health in before), before
    variables = dict(BUILD_SETUP, vllm_build_wheel_cache_dir=str(tmp_path / "wheels"), vllm_build_git_ref="v0.32.2-broken",
                     **SERVE)
    result = run_playbook(fleet, tmp_path, str(REPO_ROOT / "playbooks" / "rolling_update.yml"), variables)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert "vllm_rollout: the update of %s failed" % fleet[0].name in output, output[-3000:]
    assert "fixture_undeclared_bias" in output, output[-3000:]
    assert [state(host) for host in fleet] == before
