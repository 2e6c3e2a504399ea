"""host_facts on published dumps of real machines (tests/unit/samples/*/SOURCE.md says where each was published).

The expected values are read off the publications themselves (lscpu's CPU lists, numactl's nodes,
dmidecode's processor strings), not from this code's output.
"""

from __future__ import annotations

import pytest

import published_samples
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts, parse_cpuinfo

# sample: (model name, platform, bf16, sve2, online CPUs, CPU lists of the nodes used for binding)
EXPECTED = {
    "graviton2-t4g": ("Neoverse-N1", "AWS Graviton2", False, False, "0-1", ["0-1"]),
    "graviton2-c6g-16xlarge": ("Neoverse-N1", None, False, False, "0-63", ["0-63"]),
    "graviton3": ("Neoverse-V1", "AWS Graviton3", True, False, "0-47", ["0-47"]),
    "graviton4-m8g-2xlarge": ("Neoverse-V2", None, True, True, "0-7", ["0-7"]),
    "graviton4-c8g-16xlarge": ("Neoverse-V2", None, True, True, "0-63", ["0-63"]),
    "altra-q80-1p": ("Neoverse-N1", "Ampere Altra", False, False, "0-79", ["0-79"]),
    "altra-max-m96-1p": ("Neoverse-N1", "Ampere Altra Max", False, False, "0-95", ["0-95"]),
    "altra-max-m128-2p": ("Neoverse-N1", "Ampere Altra Max", False, False, "0-255", ["0-127", "128-255"]),
    "altra-q80-2p": ("Neoverse-N1", None, False, False, "0-159", ["0-79", "80-159"]),
    "ampereone-a192": ("Ampere-1a", "AmpereOne", True, False, "0-191", ["0-191"]),
    "grace-c1": ("Neoverse-V2", "NVIDIA Grace", True, True, "0-71", ["0-71"]),
    "grace-gh200": ("Neoverse-V2", None, True, True, "0-71", ["0-71"]),
    "grace-superchip": ("Neoverse-V2", None, True, True, "0-143", ["0-71", "72-143"]),
    "x86_64-e5-2687w-v4": ("Intel(R) Xeon(R) CPU E5-2687W v4 @ 3.00GHz", None, False, False, "0-23", ["0-11", "12-23"]),
    "x86_64-spr-2s": ("Intel(R) Xeon(R) Platinum 8462Y+", None, True, False, "0-127", ["0-31,64-95", "32-63,96-127"]),
}


def facts_of(name):
    return build_host_facts(published_samples.load_sample(name))


def test_every_sample_has_expectations_and_a_source():
    assert sorted(EXPECTED) == published_samples.sample_names()
    for name in EXPECTED:
        source = (published_samples.SAMPLES_DIR / name / "SOURCE.md").read_text()
        assert "http" in source or "commit" in source, name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample(name):
    model, platform, bf16, sve2, online, binding = EXPECTED[name]
    facts = facts_of(name)
    assert facts["cpu"]["model_name"] == model
    assert facts["cpu"]["platform"] == platform
    assert facts["cpu"]["bf16"] is bf16
    assert facts["cpu"]["flags"].get("sve2", False) is sve2
    assert facts["cpus"]["online"] == online and facts["cpus"]["usable"] == online
    assert [node["usable_cpus"] for node in facts["numa_nodes"] if node["used_for_binding"]] == binding


def test_neoverse_n1_never_has_bf16_and_v_cores_always_do():
    for name in EXPECTED:
        facts = facts_of(name)
        if facts["cpu"]["microarchitecture"] == "neoverse-n1":
            assert not facts["cpu"]["bf16"] and facts["cpu"]["flags"]["asimddp"]
        if facts["cpu"]["microarchitecture"] in ("neoverse-v1", "neoverse-v2", "ampere1a"):
            assert facts["cpu"]["bf16"] and facts["cpu"]["flags"]["i8mm"]


def test_grace_hopper_gpu_memory_nodes_are_reported_but_not_bound():
    facts = facts_of("grace-gh200")
    assert len(facts["numa_nodes"]) == 9
    gpu = facts["numa_nodes"][1]
    assert gpu["memory_mib"] == 97280 and not gpu["has_cpus"] and not gpu["used_for_binding"]
    assert facts["binding_nodes"] == [0]


def test_platform_names_only_with_evidence():
    assert facts_of("grace-c1")["cpu"]["platform_evidence"].startswith("SMBIOS processor")
    unnamed = facts_of("grace-superchip")["cpu"]
    assert unnamed["platform"] is None and "NVIDIA Grace" in unnamed["platform_candidates"]
    assert "Ampere(R)" in facts_of("altra-q80-1p")["cpu"]["platform_evidence"]


def test_full_ampereone_cpuinfo_has_192_identical_cores():
    text = (published_samples.SAMPLES_DIR / "ampereone-a192" / "cpuinfo").read_text()
    processors, dummy = parse_cpuinfo(text)
    assert len(processors) == 192 and all(block["cpu part"] == "0xac4" for block in processors)
