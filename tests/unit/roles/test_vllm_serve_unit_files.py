"""Render the vllm_serve unit for every published sample host and let systemd judge it.

The role's templates only print what module_utils/vllm_serve.serve_units computes, so rendering
them here with the role's own defaults gives the unit each platform would get. Every rendering must
pass `systemd-analyze verify` and score at most 2.0 on `systemd-analyze security --offline=yes`,
with MemoryDenyWriteExecute off (oneDNN's JIT needs writable-then-executable memory).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml

import published_samples
from ansible_collections.arm_inference.vllm.plugins.module_utils import host_facts, vllm_serve

ROLE = Path(__file__).resolve().parents[3] / "roles" / "vllm_serve"
MAX_EXPOSURE = 2.0
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")


def _role_vars():
    values = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
    values.update(yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8")))
    return values


def _instances(facts):
    """One instance of a 0.5B model, plus one per NUMA node where there are several."""
    memory_known = facts["memory"]["total_mib"] is not None and all(
        node["memory_mib"] is not None for node in facts["numa_nodes"] if node["used_for_binding"])
    extra = {} if memory_known else {"kv_cache_gib": 4}
    layouts = [[dict(name="main", model_params_billion=0.5, **extra)]]
    if len(facts["binding_nodes"]) > 1:
        layouts.append([dict(name="node%d" % node, model_params_billion=0.5, tensor_parallel_size=1, **extra)
                        for node in facts["binding_nodes"]])
    return layouts


def render(facts, instances, venv_path, api_key=True):
    values = _role_vars()
    units = vllm_serve.serve_units(facts, instances, {
        "model": "/srv/models/qwen2.5-0.5b-instruct", "venv_path": venv_path,
        "launcher_path": values["_vllm_serve_launcher"], "tcmalloc_path": "/usr/lib/libtcmalloc_minimal.so.4",
        "api_key_configured": api_key})
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), trim_blocks=True,
                                     keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    # vars/main.yml derives it from the key variables with Jinja; the rendering here sets it directly.
    values["_vllm_serve_api_key_source"] = values["_vllm_serve_api_key_path"] if api_key else ""
    # plan.yml keeps the environment's lines apart from the units (they may hold tokens).
    values["__vllm_serve_environment_lines"] = vllm_serve.environment_files(units)
    rendered = []
    for unit in vllm_serve.public_units(units):
        values["item"] = unit
        rendered.append((unit, environment.get_template("vllm-serve.service.j2").render(values),
                         environment.get_template("vllm-serve.env.j2").render(values)))
    return rendered


@pytest.fixture(scope="module")
def fake_venv(tmp_path_factory):
    """verify insists that ExecStart's program exists; point the venv at this interpreter."""
    venv = tmp_path_factory.mktemp("venv")
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(sys.executable)
    return str(venv)


def _renderings(fake_venv):
    for name in published_samples.sample_names():
        facts = host_facts.build_host_facts(published_samples.load_sample(name))
        for instances in _instances(facts):
            for unit, text, env in render(facts, instances, fake_venv):
                yield name, unit, text, env


@needs_systemd_analyze
def test_every_sample_unit_verifies_and_scores_low_exposure(tmp_path, fake_venv):
    checked = 0
    for name, unit, text, dummy_env in _renderings(fake_venv):
        directory = tmp_path / name
        directory.mkdir(exist_ok=True)
        path = directory / unit["unit"]
        path.write_text(text, encoding="utf-8")
        verify = subprocess.run([SYSTEMD_ANALYZE, "verify", "--recursive-errors=no", str(path)],
                                capture_output=True, text=True, check=False)
        assert verify.returncode == 0 and not verify.stdout.strip() and not verify.stderr.strip(), (
            name, unit["unit"], verify.stdout, verify.stderr)
        security = subprocess.run([SYSTEMD_ANALYZE, "security", "--offline=yes", "--no-pager", str(path)],
                                  capture_output=True, text=True, check=False, env=dict(os.environ, SYSTEMD_COLORS="0"))
        match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", security.stdout)
        assert match, (name, security.stdout, security.stderr)
        assert float(match.group(1)) <= MAX_EXPOSURE, (name, unit["unit"], security.stdout)
        assert re.search(r"^\S*\s*MemoryDenyWriteExecute=\s", security.stdout, re.M), security.stdout
        checked += 1
    assert checked >= len(published_samples.sample_names())


def test_unit_keeps_memory_deny_write_execute_off_and_the_key_out_of_the_environment(fake_venv):
    for name, unit, text, env in _renderings(fake_venv):
        assert "MemoryDenyWriteExecute=no" in text.splitlines(), name
        assert "LoadCredential=api_key:/etc/vllm-serve/api_key" in text.splitlines(), name
        assert "VLLM_API_KEY=" not in env and "api-key" not in text, name
        assert "ARM_INFERENCE_API_KEY_REQUIRED=\"1\"" in env.splitlines(), name
        assert text.splitlines()[0] == _role_vars()["_vllm_serve_marker"]


def test_unit_prints_the_computed_tuning(fake_venv):
    for name, unit, text, env in _renderings(fake_venv):
        lines = env.splitlines()
        for key, value in unit["profile"]["environment"].items():
            assert '%s="%s"' % (key, value) in lines, (name, key)
        assert 'LD_PRELOAD="/usr/lib/libtcmalloc_minimal.so.4"' in lines
        assert ("ONEDNN_DEFAULT_FPMATH_MODE" in env) == bool(unit["profile"]["onednn_fpmath_mode"])
        exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
        assert "--tensor-parallel-size %d" % unit["profile"]["tensor_parallel_size"] in exec_start
        affinity = [line for line in text.splitlines() if line.startswith("CPUAffinity=")]
        assert affinity == ["CPUAffinity=%s" % unit["cpu_affinity"]], name


def test_no_api_key_means_no_credential_line(fake_venv):
    facts = host_facts.build_host_facts(published_samples.load_sample("graviton4-c8g-16xlarge"))
    [(dummy_unit, text, dummy_env)] = render(facts, [{"name": "main", "model_params_billion": 0.5}], fake_venv, api_key=False)
    assert not any(line.startswith("LoadCredential=") for line in text.splitlines())
