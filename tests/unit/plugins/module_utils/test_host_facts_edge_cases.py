"""host_facts on partial, malformed and restricted hosts: a clear error or a documented fallback.

Each case writes the few /proc and /sys files it needs into a temporary root and reads them with the
same read_snapshot the module uses, so file discovery is tested as well as parsing.
"""

from __future__ import annotations

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import (
    HostFactsError,
    build_host_facts,
    format_cpulist,
    parse_cpulist,
    parse_smbios_strings,
    read_snapshot,
    smbios_processor,
)

N1_BLOCK = (
    "processor\t: {n}\nBogoMIPS\t: 50.00\n"
    "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n"
)


def write_host(root, files):
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def n1_host(root, cpus=4, nodes=None, extra=None):
    files = {
        "proc/cpuinfo": "".join(N1_BLOCK.format(n=n) for n in range(cpus)),
        "proc/meminfo": "MemTotal:       16384000 kB\nMemFree:        15000000 kB\nMemAvailable:   15500000 kB\n",
        "sys/devices/system/cpu/online": "0-%d\n" % (cpus - 1),
        "sys/devices/system/cpu/present": "0-%d\n" % (cpus - 1),
        "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
    }
    for node_id, (cpulist, kib) in (nodes or {0: ("0-%d" % (cpus - 1), 16384000)}).items():
        files["sys/devices/system/node/node%d/cpulist" % node_id] = cpulist + "\n"
        files["sys/devices/system/node/node%d/meminfo" % node_id] = "Node %d MemTotal:       %d kB\n" % (node_id, kib)
    files.update(extra or {})
    return write_host(root, files)


def facts_of(root, affinity=None, machine="aarch64"):
    return build_host_facts(read_snapshot(str(root), affinity=affinity, machine=machine))


def test_cpulist_round_trip_and_strides():
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("0-7:2/4") == [0, 1, 4, 5]
    assert parse_cpulist("") == []
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"


@pytest.mark.parametrize("text", ["0-", "a-b", "3-1", "0,,2", "0-7:0/0"])
def test_malformed_cpulist_is_a_clear_error(text):
    with pytest.raises(HostFactsError, match="CPU list"):
        parse_cpulist(text, "CPU list")


def test_plain_host_reads_everything(tmp_path):
    facts = facts_of(n1_host(tmp_path))
    assert facts["cpu"]["model_name"] == "Neoverse-N1"
    assert facts["cpus"] == {"online": "0-3", "online_count": 4, "offline": "", "usable": "0-3", "usable_count": 4,
                             "restricted": False}
    assert facts["memory"] == {"total_mib": 16000, "available_mib": 15136}
    assert facts["transparent_hugepages"] == {"enabled": "madvise", "defrag": None}
    assert facts["warnings"] == []


def test_empty_cpuinfo_falls_back_to_no_features_with_a_warning(tmp_path):
    facts = facts_of(n1_host(tmp_path, extra={"proc/cpuinfo": ""}))
    assert facts["cpu"]["features"] == [] and facts["cpu"]["bf16"] is False
    assert facts["cpus"]["online"] == "0-3"
    assert any("empty" in warning for warning in facts["warnings"])


def test_missing_cpuinfo_fields_leave_the_model_unknown(tmp_path):
    cpuinfo = "processor\t: 0\nFeatures\t: fp asimd bf16\nCPU implementer\t: 0x41\n\nprocessor\t: 1\nFeatures\t: fp asimd\n"
    facts = facts_of(n1_host(tmp_path, cpus=2, extra={"proc/cpuinfo": cpuinfo}))
    assert facts["cpu"]["microarchitecture"] is None
    # bf16 only counts when every CPU has it.
    assert facts["cpu"]["features"] == ["asimd", "fp"] and facts["cpu"]["bf16"] is False


def test_unknown_part_keeps_features(tmp_path):
    cpuinfo = "processor\t: 0\nFeatures\t: fp asimd asimddp asimdhp bf16\nCPU implementer\t: 0x61\nCPU part\t: 0x099\n"
    facts = facts_of(n1_host(tmp_path, cpus=1, extra={"proc/cpuinfo": cpuinfo}))
    assert facts["cpu"]["implementer"] == "0x61" and facts["cpu"]["microarchitecture"] is None
    assert facts["cpu"]["bf16"] is True
    assert any("not in this collection's table" in warning for warning in facts["warnings"])


def test_offline_cpus_are_reported_and_never_bound(tmp_path):
    root = n1_host(tmp_path, cpus=8, nodes={0: ("0-3", 8192000), 1: ("4-7", 8192000)},
                   extra={"sys/devices/system/cpu/online": "0-2,4-7\n",
                          "sys/devices/system/node/node0/cpulist": "0-2\n"})
    facts = facts_of(root)
    assert facts["cpus"]["offline"] == "3"
    assert [node["usable_cpus"] for node in facts["numa_nodes"]] == ["0-2", "4-7"]


def test_cpuset_restricted_container_uses_only_its_cpus(tmp_path):
    root = n1_host(tmp_path, cpus=8, nodes={0: ("0-3", 8192000), 1: ("4-7", 8192000)})
    facts = facts_of(root, affinity=[2, 3])
    assert facts["cpus"]["usable"] == "2-3" and facts["cpus"]["restricted"] is True
    assert facts["binding_nodes"] == [0]
    assert facts["numa_nodes"][1]["used_for_binding"] is False and facts["numa_nodes"][1]["has_cpus"] is True


def test_affinity_outside_online_cpus_is_an_error(tmp_path):
    with pytest.raises(HostFactsError, match="No online CPU is usable"):
        facts_of(n1_host(tmp_path), affinity=[99])


def test_memoryless_and_cpuless_nodes(tmp_path):
    root = n1_host(tmp_path, cpus=4, nodes={0: ("0-1", 0), 1: ("2-3", 8192000), 2: ("", 4096000)})
    facts = facts_of(root)
    node0, node1, node2 = facts["numa_nodes"]
    assert node0["memory_mib"] == 0 and node0["used_for_binding"] is True
    assert node2["has_cpus"] is False and node2["used_for_binding"] is False and node2["memory_mib"] == 4000
    assert facts["binding_nodes"] == [0, 1]
    assert any("node 0 has CPUs but no memory" in warning for warning in facts["warnings"])


def test_no_numa_directory_means_one_node(tmp_path):
    root = n1_host(tmp_path)
    for path in sorted((root / "sys/devices/system/node").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (root / "sys/devices/system/node").rmdir()
    facts = facts_of(root)
    assert facts["numa_nodes"][0]["cpus"] == "0-3" and facts["numa_nodes"][0]["memory_mib"] == 16000
    assert any("No NUMA information" in warning for warning in facts["warnings"])


def test_no_online_file_and_no_cpuinfo_is_an_error(tmp_path):
    root = n1_host(tmp_path, extra={"proc/cpuinfo": "", "sys/devices/system/cpu/online": ""})
    with pytest.raises(HostFactsError, match="Cannot tell which CPUs are online"):
        facts_of(root)


def test_missing_meminfo_sums_the_nodes(tmp_path):
    root = n1_host(tmp_path, extra={"proc/meminfo": "garbage\n"})
    facts = facts_of(root)
    assert facts["memory"]["total_mib"] == 16000 and facts["memory"]["available_mib"] is None


def test_emulated_aarch64_userspace_on_an_x86_cpu(tmp_path):
    cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\nflags\t\t: fpu avx512f\n"
    facts = facts_of(n1_host(tmp_path, cpus=1, extra={"proc/cpuinfo": cpuinfo}))
    assert facts["architecture"] == "aarch64" and facts["cpu"]["cpuinfo_architecture"] == "x86_64"
    assert facts["cpu"]["features"] == [] and facts["cpu"]["bf16"] is False
    assert any("emulation" in warning for warning in facts["warnings"])


def test_unknown_machine_is_an_error(tmp_path):
    with pytest.raises(HostFactsError, match="machine type"):
        build_host_facts({"machine": ""})


def smbios_type4(manufacturer, version):
    formatted = bytearray(0x30)
    formatted[0], formatted[1] = 4, 0x30
    formatted[0x04], formatted[0x07], formatted[0x10] = 1, 2, 3
    return bytes(formatted) + b"CPU 0\x00" + manufacturer + b"\x00" + version + b"\x00\x00"


def test_smbios_processor_strings_name_the_platform(tmp_path):
    raw = smbios_type4(b"Ampere(R)", b"Ampere(R) Altra(R) Max Processor")
    assert parse_smbios_strings(raw) == ["CPU 0", "Ampere(R)", "Ampere(R) Altra(R) Max Processor"]
    root = n1_host(tmp_path)
    (root / "sys/firmware/dmi/entries/4-0").mkdir(parents=True)
    (root / "sys/firmware/dmi/entries/4-0/raw").write_bytes(raw)
    facts = facts_of(root)
    assert facts["cpu"]["platform"] == "Ampere Altra Max"
    assert "SMBIOS" in facts["cpu"]["platform_evidence"]


def test_truncated_smbios_is_ignored():
    assert smbios_processor(b"\x04\x30") == {}
    assert parse_smbios_strings(b"\x04\xff") == []


def test_ec2_dmi_names_graviton2(tmp_path):
    root = n1_host(tmp_path, extra={"sys/class/dmi/id/sys_vendor": "Amazon EC2\n",
                                    "sys/class/dmi/id/product_name": "m6g.xlarge\n"})
    facts = facts_of(root)
    assert facts["cpu"]["platform"] == "AWS Graviton2"
    assert "m6g.xlarge" in facts["cpu"]["platform_evidence"]


def test_n1_without_evidence_lists_candidates(tmp_path):
    facts = facts_of(n1_host(tmp_path))
    assert facts["cpu"]["platform"] is None
    assert facts["cpu"]["platform_candidates"] == ["AWS Graviton2", "Ampere Altra", "Ampere Altra Max"]
