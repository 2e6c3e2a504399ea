"""Run the host_facts module for real on each molecule instance and compare it with what the instance shows.

The module goes through Ansible (the instance's own Python, become) exactly as a play runs it; the
expected values come from plain shell commands in the same container.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import test_site

testinfra_hosts = test_site.testinfra_hosts  # the same podman:// instances as the site tests


@pytest.fixture(scope="module")
def module_facts(host):
    name = host.backend.name
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_NOCOLOR="1")
    run = subprocess.run(
        ["ansible", name, "-i", os.environ["MOLECULE_INVENTORY_FILE"], "-b", "-m", "arm_inference.vllm.host_facts"],
        capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    # Enabled timing callbacks may print before the JSON document.
    document = run.stdout[run.stdout.index("\n{") + 1:] if not run.stdout.startswith("{") else run.stdout
    result = json.JSONDecoder().raw_decode(document)[0]["plays"][0]["tasks"][0]["hosts"][name]
    return result["ansible_facts"]["arm_inference_host"]


def shell(host, command):
    return host.check_output(command).strip()


def test_cpus_match_nproc_and_sysfs(host, module_facts):
    observed = shell(host, "nproc; cat /sys/devices/system/cpu/online; grep -c ^processor /proc/cpuinfo").split()
    assert module_facts["cpus"]["usable_count"] == int(observed[0])
    assert module_facts["cpus"]["online"] == observed[1]
    assert module_facts["cpus"]["online_count"] == int(observed[2])


def test_architecture_and_cpu_identity_match_proc_cpuinfo(host, module_facts):
    assert module_facts["architecture"] == shell(host, "uname -m")
    cpuinfo = host.file("/proc/cpuinfo").content_string
    # bf16 as vLLM's CPU backend uses it: the Arm bf16 extension, or AVX512-BF16/AMX-BF16 on x86.
    if "CPU implementer" in cpuinfo:
        described, feature_key, bf16_names = "aarch64", "Features", {"bf16"}
    else:
        described, feature_key, bf16_names = "x86_64", "flags", {"avx512_bf16", "amx_bf16"}
    feature_lines = [line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.split(":", 1)[0].strip() == feature_key]
    features = set.intersection(*(set(names) for names in feature_lines))
    assert module_facts["cpu"]["cpuinfo_architecture"] == described
    if described == module_facts["architecture"]:
        assert set(module_facts["cpu"]["features"]) <= features
        assert module_facts["cpu"]["bf16"] is bool(features & bf16_names)
    else:
        # qemu-user shows the emulating host's /proc/cpuinfo: the module must not claim any feature.
        assert module_facts["cpu"]["features"] == [] and module_facts["cpu"]["bf16"] is False
        assert module_facts["build_class"] == "%s-unknown-cpu" % module_facts["architecture"]
        assert any("emulation" in warning for warning in module_facts["warnings"])


def test_memory_and_numa_nodes_match(host, module_facts):
    mem_total_kib = int(shell(host, "awk '/^MemTotal:/ {print $2}' /proc/meminfo"))
    assert module_facts["memory"]["total_mib"] == mem_total_kib // 1024
    nodes = shell(host, "ls -d /sys/devices/system/node/node[0-9]* | sed 's|.*/node||' | sort -n").split()
    assert [node["id"] for node in module_facts["numa_nodes"]] == [int(node) for node in nodes]
    thp = shell(host, "cat /sys/kernel/mm/transparent_hugepage/enabled")
    assert "[%s]" % module_facts["transparent_hugepages"]["enabled"] in thp
