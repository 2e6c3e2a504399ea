"""Load the published machine descriptions under tests/unit/samples/ as host_facts snapshots.

Each directory is one published machine (or, where its SOURCE.md says so, one platform assembled from
two publications). Files keep the publisher's text byte for byte; this loader reads the formats they
come in - /proc/cpuinfo, lscpu, numactl -H, free -h, dmidecode, sbc-bench's device-info - and turns
them into the snapshot that plugins/module_utils/host_facts.py reads from /proc and /sys on a live host:

* cpuinfo: the published file; without one, lscpu's Vendor ID, Model name and Flags become one
  cpuinfo block per online CPU (the fields lscpu itself prints from /proc/cpuinfo and MIDR).
* NUMA nodes: numactl -H (CPUs and size); without it lscpu's node CPU lists, with the published total
  memory split evenly over the nodes that have CPUs (SOURCE.md says so for those samples).
* meminfo: the published file, else free -h's total and available columns.
* DMI: dmidecode's System and first populated Processor entries, sbc-bench's device-info, or
  lscpu's "BIOS Model name" (SMBIOS processor version).
* memory: a `memory` file holds a published size (with its source in a comment) where no dump was.
* wrapped lscpu Flags: terminals wrap inside words; a fragment is glued to the next one when only the
  glued word is a feature name seen in the published cpuinfo files.
"""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import (
    IMPLEMENTERS,
    PARTS,
    format_cpulist,
    parse_cpulist,
)

SAMPLES_DIR = Path(__file__).resolve().parent / "samples"
_UNITS = {"k": 1, "m": 1024, "g": 1024 ** 2, "t": 1024 ** 3}


def sample_names():
    return sorted(path.name for path in SAMPLES_DIR.iterdir() if (path / "SOURCE.md").is_file())


def _feature_vocabulary():
    """Every feature name in the published cpuinfo files: used to mend Flags wrapped inside a word."""
    names = set()
    for path in SAMPLES_DIR.glob("*/cpuinfo"):
        for line in path.read_text().splitlines():
            key, sep, value = line.partition(":")
            if key.strip() in ("Features", "flags"):
                names.update(value.split())
    return names


def _join_wrapped(head, tail, vocabulary):
    """Join a wrapped continuation: terminals wrap inside words ('asim' + 'dfhm'), lscpu between them."""
    if not head:
        return tail
    left, dummy, right = head.rpartition(" ")[2], None, tail.split(" ")[0]
    if (left not in vocabulary or right not in vocabulary) and left + right in vocabulary:
        return head + tail
    return head + " " + tail


def parse_lscpu(text):
    """lscpu's 'Key: value' output, flat or tree layout; wrapped Flags lines are joined."""
    vocabulary = _feature_vocabulary()
    values = {}
    last = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            last = key.strip()
            values[last] = value.strip()
        elif line.strip() and last:
            values[last] = _join_wrapped(values[last], line.strip(), vocabulary)
    return values


def parse_numactl(text):
    """numactl -H -> {node: {"cpus": cpulist, "memory_kib": int}}; wrapped CPU lines are joined."""
    nodes = {}
    last = None
    for line in text.splitlines():
        match = re.match(r"^node (\d+) (cpus|size|free):\s*(.*)$", line.strip())
        if match:
            node = nodes.setdefault(int(match.group(1)), {"cpus": [], "memory_kib": None})
            last = node if match.group(2) == "cpus" else None
            if match.group(2) == "cpus":
                node["cpus"] += [int(cpu) for cpu in match.group(3).split()]
            elif match.group(2) == "size":
                number, unit = match.group(3).split()
                node["memory_kib"] = int(number) * _UNITS[unit[0].lower()]
        elif last is not None and re.match(r"^[\d\s]+$", line):
            last["cpus"] += [int(cpu) for cpu in line.split()]
        else:
            last = None
    return dict((node_id, {"cpus": format_cpulist(node["cpus"]), "memory_kib": node["memory_kib"]})
                for node_id, node in nodes.items())


def parse_free(text):
    """free -h -> {"MemTotal": KiB, "MemAvailable": KiB} (rounded as free -h rounds)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    header = lines[0]
    mem = next(line for line in lines if line[0] == "Mem:")
    result = {}
    for name, column in (("MemTotal", "total"), ("MemAvailable", "available")):
        if column in header:
            match = re.match(r"^([\d.]+)([KMGT])i?$", mem[header.index(column) + 1])
            result[name] = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    return result


def parse_dmidecode(text):
    """System manufacturer/product and the first populated processor's manufacturer/version."""
    dmi = {}
    section = None
    processor = {}
    for line in text.splitlines():
        if line and not line[0].isspace():
            if processor.get("populated") and "processor_version" not in dmi:
                dmi.update((key, value) for key, value in processor.items() if key != "populated")
            section = line.strip()
            processor = {}
            continue
        key, sep, value = line.strip().partition(":")
        value = value.strip()
        if section == "System Information" and key == "Manufacturer":
            dmi["sys_vendor"] = value
        elif section == "System Information" and key == "Product Name":
            dmi["product_name"] = value
        elif section == "Processor Information" and key == "Manufacturer":
            processor["processor_manufacturer"] = value
        elif section == "Processor Information" and key == "Version":
            processor["processor_version"] = value
        elif section == "Processor Information" and key == "Status":
            processor["populated"] = value.startswith("Populated")
    if processor.get("populated") and "processor_version" not in dmi:
        dmi.update((key, value) for key, value in processor.items() if key != "populated")
    return dmi


def _cpuinfo_from_lscpu(lscpu, online):
    arch = lscpu.get("Architecture")
    if arch == "aarch64":
        implementer = next((code for code, name in IMPLEMENTERS.items() if name == lscpu.get("Vendor ID")), None)
        part = next((p for (i, p), (dummy, name) in PARTS.items()
                     if i == implementer and name == lscpu.get("Model name")), None)
        lines = ["Features\t: %s" % lscpu.get("Flags", "")]
        if implementer is not None:
            lines.append("CPU implementer\t: 0x%02x" % implementer)
        if part is not None:
            lines.append("CPU part\t: 0x%03x" % part)
    else:
        lines = ["vendor_id\t: %s" % lscpu.get("Vendor ID", ""), "model name\t: %s" % lscpu.get("Model name", ""),
                 "flags\t\t: %s" % lscpu.get("Flags", "")]
    return "".join("processor\t: %d\n%s\n\n" % (cpu, "\n".join(lines)) for cpu in online)


def load_sample(name):
    """Snapshot (the dict host_facts.read_snapshot returns) of a published sample."""
    directory = SAMPLES_DIR / name

    def read(file_name):
        path = directory / file_name
        return path.read_text() if path.is_file() else None

    lscpu = parse_lscpu(read("lscpu") or "")
    numactl = parse_numactl(read("numactl-H")) if read("numactl-H") else None
    cpuinfo = read("cpuinfo")
    online = lscpu.get("On-line CPU(s) list")
    if online is None and numactl:
        online = format_cpulist(cpu for node in numactl.values() for cpu in parse_cpulist(node["cpus"]))
    if cpuinfo is None:
        cpuinfo = _cpuinfo_from_lscpu(lscpu, parse_cpulist(online))
    if read("meminfo") is not None:
        meminfo = read("meminfo")
    else:
        memory = parse_free(read("free-h")) if read("free-h") else {}
        match = re.search(r"^total_gib:\s*(\d+)", read("memory") or "", re.M)
        if match:
            memory = {"MemTotal": int(match.group(1)) * 1024 * 1024}
        meminfo = "".join("%s: %d kB\n" % item for item in memory.items())
    total_kib = parse_free(read("free-h"))["MemTotal"] if read("free-h") else memory.get("MemTotal")
    nodes = numactl
    if nodes is None:
        lists = dict((int(match.group(1)), value) for key, value in lscpu.items()
                     for match in [re.match(r"^NUMA node(\d+) CPU\(s\)$", key)] if match)
        total = total_kib
        with_cpus = [node_id for node_id, value in lists.items() if value]
        nodes = dict((node_id, {"cpus": value,
                                "memory_kib": total // len(with_cpus) if total and node_id in with_cpus else None})
                     for node_id, value in lists.items()) or None
    dmi = parse_dmidecode(read("dmidecode") or "")
    device = read("device-info") or ""
    for field, key in (("Manufacturer", "sys_vendor"), ("Product Name", "product_name")):
        match = re.search(r"^\s*%s:\s*(.+)$" % field, device, re.M)
        if match and key not in dmi:
            dmi[key] = match.group(1).strip()
    # lscpu prints SMBIOS type 4's manufacturer and version as "BIOS Vendor ID" / "BIOS Model name".
    if "processor_version" not in dmi and lscpu.get("BIOS Model name"):
        dmi["processor_manufacturer"] = lscpu.get("BIOS Vendor ID")
        dmi["processor_version"] = lscpu["BIOS Model name"]
    machine = lscpu.get("Architecture") or ("aarch64" if "CPU implementer" in cpuinfo else "x86_64")
    return {
        "machine": machine,
        "cpuinfo": cpuinfo,
        "online": online,
        "present": None,
        "affinity": None,
        "nodes": nodes,
        "meminfo": meminfo,
        "thp_enabled": read("thp-enabled"),
        "thp_defrag": None,
        "dmi": dmi,
    }
