"""Bad input fails in preflight, names the variable (and what is allowed), and changes nothing."""

from __future__ import annotations

import pytest

from harness import REPO_ROOT

SITE = str(REPO_ROOT / "playbooks" / "site.yml")
ROLLING_UPDATE = str(REPO_ROOT / "playbooks" / "rolling_update.yml")
SECRET = "s3cr3t-token"
# Debian 12 has no GCC >= 12.3, which build_deps refuses on x86_64 by default; the native test host
# is x86_64, so the other build_deps cases relax that floor to reach the check they are about.
RELAXED_FLOOR = {"build_deps_compiler_floor_policy": "warn"}

# vllm_serve without the tcmalloc role: the cases below are about other variables.
# /srv/models/m does not exist, so its size is given: nothing could weigh it.
SERVE = {"vllm_serve_model": "/srv/models/m", "vllm_serve_preload_tcmalloc": False,
         "vllm_serve_instances": [{"name": "main", "model_weights_gib": 1}]}

# Every variable's rules run in site.yml's preflight (test_preflight_matrix.py, 100+ cases on one fresh
# host, packages the host's sources lack among them). Here: each role refuses bad input on its own when
# it runs alone (through the same input_check, which asks the package manager too), and what only a
# role can see on the host: the tcmalloc the role before it publishes, a venv or vLLM that is not there yet.
CASES = [
    # role, extra vars, words the error must contain
    ("build_deps", {"build_deps_python_version": "3.9"},
     ["build_deps_python_version: must be 3.10 or newer (vLLM's CPU backend) (got '3.9')"]),
    ("build_deps", {"build_deps_python_version": "3.99"},
     ["build_deps_python_version: Python 3.99 is not installable here", "no package source of this host has python3.99-dev"]),
    ("build_deps", {"build_deps_extra_packages": ["no-such-package-xyz"]},
     ["build_deps_extra_packages: no package source of this host has no-such-package-xyz"]),
    # A role run alone gets Ansible's own argument spec check first (its wording); the preflight
    # play words the same problem as one line (test_preflight_matrix.py).
    ("tcmalloc", {"tcmalloc_variant": "huge"}, ["tcmalloc_variant must be one of: minimal, full, got: huge"]),
    ("python_venv", {"python_venv_python_version": "3.99"},
     ["python_venv_python_version: Python 3.99 is not installable here", "python3.99, python3.99-venv"]),
    ("python_venv", {"python_venv_pip_index_url": "ftp://user:%s@mirror.example/simple" % SECRET},
     ["python_venv_pip_index_url: must be an http://, https:// or file:// URL"]),
    # With the gateway on, vllm_serve generates vLLM a key (api_key_plan), so only a bind without the gateway
    # (and no key kept from an earlier run: a fresh host) has none.
    ("vllm_serve", dict(SERVE, vllm_serve_host="0.0.0.0", vllm_gateway_enabled=False, vllm_serve_ip_address_allow=["any"]),
     ["vllm_serve_host: is reachable from other machines, but no API key is configured (got '0.0.0.0')"]),
    ("vllm_serve", dict(SERVE, vllm_serve_api_key=SECRET + "\nX=1"), ["vllm_serve_api_key: contains control characters"]),
    ("vllm_serve", dict(SERVE, vllm_serve_instances=[{"name": "main", "model": "llama"}]),
     ["vllm_serve_instances[0].model: llama is neither a model declared in vllm_model_models"]),
    ("vllm_serve", dict(SERVE, vllm_serve_instances=[{"name": "main", "model": "org/hub-model"}]),
     ["vllm_serve_instances[0]: the model's weights are unknown", "model_weights_gib", "model_params_billion"]),
    ("vllm_serve", dict(SERVE, vllm_serve_instances=[{"name": "main"}]),
     ["vllm_serve_instances[0].model (or vllm_serve_model): the model directory cannot be read", "/srv/models/m"]),
    ("vllm_serve", dict(SERVE, vllm_serve_preload_tcmalloc=True), ["vllm_serve_preload_tcmalloc", "vllm_serve_tcmalloc_path"]),
    ("vllm_serve", SERVE, ["no vLLM found in vllm_serve_venv_path /opt/vllm/current/venv", "vllm_build"]),
    ("vllm_build", {"vllm_build_git_ref": "v1 --upload-pack=touch"},
     ["vllm_build_git_ref: must be a tag, branch or commit", "'v1 --upload-pack=touch'"]),
    ("vllm_build", {"vllm_build_min_free_disk_gib": 0}, ["no build venv at /opt/vllm/venv", "prepare.yml"]),
    ("vllm_gateway", dict(SERVE, vllm_gateway_api_keys=[{"name": "ops", "key": ""}]),
     ["vllm_gateway_api_keys[0].key: is empty; set a random key"]),
    ("vllm_benchmark", {"vllm_benchmark_concurrency": [4, 0]},
     ["vllm_benchmark_concurrency: must be a non-empty list of integers >= 1 (got [4, 0])"]),
    ("vllm_rollout", {"vllm_rollout_smoke_concurrency": 0}, ["vllm_rollout_smoke_concurrency: must be an integer >= 1"]),
]


@pytest.mark.parametrize("role,variables,expected", CASES, ids=["%s-%s" % (c[0], "-".join(c[1])) for c in CASES])
def test_bad_input_fails_before_any_change(supported_host, tmp_path, role, variables, expected):
    before = supported_host.state()
    if role == "build_deps":
        variables = dict(RELAXED_FLOOR, **variables)
    result = supported_host.playbook(tmp_path, "arm_inference.vllm." + role, variables)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    for word in expected:
        assert word in output, "%r missing from:\n%s" % (word, output[-3000:])
    assert SECRET not in output
    assert supported_host.state() == before


@pytest.mark.parametrize("role", ["build_deps", "tcmalloc", "python_venv", "vllm_serve", "vllm_build", "vllm_gateway"])
def test_unsupported_os_fails_naming_what_is_supported(unsupported_host, tmp_path, role):
    before = unsupported_host.state()
    result = unsupported_host.playbook(tmp_path, "arm_inference.vllm." + role, {})
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "%s: operating system Debian" % role in output, output[-3000:]
    assert "is not supported (supported: Debian 12, Debian 13, Ubuntu 22.04, Ubuntu 24.04" in output
    assert unsupported_host.state() == before


def test_site_checks_every_role_before_any_host_changes(supported_host, tmp_path):
    before = supported_host.state()
    result = supported_host.playbook(tmp_path, SITE, dict(RELAXED_FLOOR, vllm_serve_port="eighty", tcmalloc_variant="huge"))
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    for word in ("vllm_serve_port", "tcmalloc_variant", "minimal, full"):
        assert word in output, "%r missing from:\n%s" % (word, output[-3000:])
    assert "PLAY [Provision vLLM hosts]" not in output, output[-3000:]
    assert supported_host.state() == before


def test_site_asks_for_a_model_before_any_host_changes(supported_host, tmp_path):
    before = supported_host.state()
    instances = [{"name": "a", "model": "/srv/m"}, {"name": "b"}]
    result = supported_host.playbook(tmp_path, SITE, dict(RELAXED_FLOOR, vllm_serve_instances=instances))
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "vllm_serve_instances[1].model (or vllm_serve_model): is required (got '')" in output, output[-3000:]
    assert '"arm_inference_host"' not in output, "the failure prints its message only"
    assert "PLAY [Provision vLLM hosts]" not in output, output[-3000:]
    assert supported_host.state() == before


def test_rolling_update_checks_the_smoke_settings_before_any_host_changes(supported_host, tmp_path):
    before = supported_host.state()
    result = supported_host.playbook(tmp_path, ROLLING_UPDATE, dict(RELAXED_FLOOR, vllm_benchmark_timeout="never"))
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "vllm_benchmark_timeout" in output and "int" in output, output[-3000:]
    assert "PLAY [Roll the update through the fleet]" not in output, output[-3000:]
    assert supported_host.state() == before


def test_site_refuses_an_unsupported_os_before_any_host_changes(unsupported_host, tmp_path):
    before = unsupported_host.state()
    result = unsupported_host.playbook(tmp_path, SITE, {})
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "preflight: operating system Debian" in output and "PLAY [Provision vLLM hosts]" not in output, output[-3000:]
    assert unsupported_host.state() == before
