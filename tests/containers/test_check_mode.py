"""Check mode on a fresh host succeeds, reports the changes it would make, and makes none."""

from __future__ import annotations

import re

import pytest

# The native Debian 12 test host is x86_64, where build_deps refuses Debian 12's GCC 12.2 by default.
ROLE_VARS = {
    "build_deps": {"build_deps_compiler_floor_policy": "warn"},
    "tcmalloc": {},
    "python_venv": {"python_venv_pip_ca_bundle": "/etc/ssl/certs/ca-certificates.crt"},
    # The gateway alone on a host vllm_serve has not reached: its rules see the instance it would front. The
    # container gives a service 4096 open files (nofile), too few for the default 4096 connection slots.
    "vllm_gateway": {"vllm_serve_model": "/srv/models/m", "vllm_serve_instances": [{"name": "main", "model_weights_gib": 1}],
                     "vllm_gateway_api_keys": [{"name": "ops", "key": "941eeb2bdf0cb3dc6c976db09ca92cc3"}],
                     "vllm_gateway_max_connections": 1024},
}


@pytest.mark.parametrize("role", sorted(ROLE_VARS))
def test_check_mode_on_a_fresh_host_changes_nothing(supported_host, tmp_path, role):
    before = supported_host.state()
    result = supported_host.playbook(tmp_path, "arm_inference.vllm." + role, ROLE_VARS[role], options=["--check"])
    assert result.returncode == 0, result.stdout[-3000:]
    assert "Would install:" in result.stdout
    assert int(re.search(r"changed=(\d+)", result.stdout).group(1)) > 0
    assert supported_host.state() == before


def test_vllm_serve_in_check_mode_on_a_fresh_host_renders_its_units_and_changes_nothing(supported_host, tmp_path):
    # No vLLM, no service user, no tcmalloc yet: the role's one predicate for such a host
    # (__vllm_serve_unprepared) skips what needs them and says what it cannot know yet.
    before = supported_host.state()
    variables = {"vllm_serve_model": "/srv/models/m",
                 "vllm_serve_instances": [{"name": "main", "model_weights_gib": 1}]}
    result = supported_host.playbook(tmp_path, "arm_inference.vllm.vllm_serve", variables,
                                     options=["--check", "--diff"])
    assert result.returncode == 0, result.stdout[-3000:]
    assert "check mode, tcmalloc is not installed yet" in result.stdout
    assert "vllm-serve-main.service" in result.stdout
    assert int(re.search(r"changed=(\d+)", result.stdout).group(1)) > 0
    assert supported_host.state() == before


def test_vllm_model_in_check_mode_on_a_fresh_host_reports_the_hub_model_and_changes_nothing(supported_host, tmp_path):
    # No tools venv yet (its Python does not exist: __vllm_model_unprepared): the hub model is reported, not read,
    # so its endpoint (a closed port; the revision is a commit, nothing to resolve) is never asked.
    before = supported_host.state()
    model = {"name": "tiny", "source": "hf://org/tiny", "revision": "1" * 40, "endpoint": "http://127.0.0.1:9"}
    result = supported_host.playbook(tmp_path, "arm_inference.vllm.vllm_model", {"vllm_model_models": [model]},
                                     options=["--check"])
    assert result.returncode == 0, result.stdout[-3000:]
    placing = result.stdout.split("TASK [arm_inference.vllm.vllm_model : Place, or seed the mirror with, tiny]")[1]
    assert placing.split("\n", 1)[1].split("TASK [")[0].strip().startswith("skipping:"), placing[:1000]
    assert int(re.search(r"changed=(\d+)", result.stdout).group(1)) > 0
    assert supported_host.state() == before
