# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host's CPUs, NUMA nodes and memory are, from /proc and /sys text.

Pure functions: they take file contents (or a snapshot of them) and never touch the host, so the
same code runs in the module and in unit tests fed with published dumps of real machines.
Problems with the input raise HostFactsError with a message meant for the operator; anything the
code can fall back from is reported in the facts' ``warnings`` list instead.
"""

from __future__ import annotations

import os
import re


class HostFactsError(ValueError):
    """The host's description cannot be understood; the message says which file and why."""


# CPU implementer and part codes as the kernel prints them in /proc/cpuinfo (MIDR_EL1 fields).
# Names follow util-linux lscpu (sys-utils/lscpu-arm.c) and the kernel's asm/cputype.h.
IMPLEMENTERS = {
    0x41: "ARM",
    0x43: "Cavium",
    0x46: "Fujitsu",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x50: "APM",
    0x51: "Qualcomm",
    0xC0: "Ampere",
}
PARTS = {
    (0x41, 0xD08): ("cortex-a72", "Cortex-A72"),
    (0x41, 0xD0C): ("neoverse-n1", "Neoverse-N1"),
    (0x41, 0xD40): ("neoverse-v1", "Neoverse-V1"),
    (0x41, 0xD49): ("neoverse-n2", "Neoverse-N2"),
    (0x41, 0xD4F): ("neoverse-v2", "Neoverse-V2"),
    (0x41, 0xD83): ("neoverse-v3ae", "Neoverse-V3AE"),
    (0x41, 0xD84): ("neoverse-v3", "Neoverse-V3"),
    (0x41, 0xD8E): ("neoverse-n3", "Neoverse-N3"),
    (0x43, 0x0AF): ("thunderx2", "ThunderX2 99xx"),
    (0x46, 0x001): ("a64fx", "A64FX"),
    (0x48, 0xD01): ("tsv110", "TaiShan-v110"),
    (0x50, 0x000): ("xgene", "X-Gene"),
    (0xC0, 0xAC3): ("ampere1", "Ampere-1"),
    (0xC0, 0xAC4): ("ampere1a", "Ampere-1a"),
}

# Platforms named only from evidence on the host: the machine's DMI vendor (cloud providers name
# themselves there) or the SMBIOS processor strings. The CPU core alone is not enough: Neoverse-N1
# is both Graviton2 and Altra, Neoverse-V2 is Graviton4, Grace and Axion.
_CLOUD_PLATFORMS = {
    ("amazon ec2", "cortex-a72"): "AWS Graviton",
    ("amazon ec2", "neoverse-n1"): "AWS Graviton2",
    ("amazon ec2", "neoverse-v1"): "AWS Graviton3",
    ("amazon ec2", "neoverse-v2"): "AWS Graviton4",
    ("google", "neoverse-v2"): "Google Axion",
    ("microsoft corporation", "neoverse-n2"): "Microsoft Azure Cobalt 100",
}
_PROCESSOR_PLATFORMS = (
    (re.compile(r"graviton\s*(\d)", re.I), lambda m: "AWS Graviton%s" % m.group(1)),
    (re.compile(r"altra(?:\s*\(r\))?\s*max", re.I), lambda m: "Ampere Altra Max"),
    (re.compile(r"altra", re.I), lambda m: "Ampere Altra"),
    (re.compile(r"ampereone", re.I), lambda m: "AmpereOne"),
    (re.compile(r"grace", re.I), lambda m: "NVIDIA Grace"),
)
_CANDIDATES = {
    "neoverse-n1": ["AWS Graviton2", "Ampere Altra", "Ampere Altra Max"],
    "neoverse-v1": ["AWS Graviton3"],
    "neoverse-v2": ["AWS Graviton4", "NVIDIA Grace", "Google Axion"],
    "neoverse-n2": ["Microsoft Azure Cobalt 100"],
    "ampere1": ["AmpereOne"],
    "ampere1a": ["AmpereOne"],
}
# Ampere's own cores exist only in the AmpereOne family, so the implementer code is evidence enough.
_IMPLEMENTER_PLATFORMS = {0xC0: "AmpereOne"}

# Features (aarch64 /proc/cpuinfo names) whose presence changes what vLLM builds or how it runs.
AARCH64_KEY_FEATURES = ("asimd", "asimddp", "asimdhp", "fphp", "sve", "sve2", "bf16", "svebf16", "i8mm", "svei8mm")
X86_KEY_FEATURES = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile")

_CPULIST_ITEM = re.compile(r"^(\d+)(?:-(\d+))?(?::(\d+)/(\d+))?$")


def normalize_machine(machine):
    return {"arm64": "aarch64", "amd64": "x86_64"}.get(machine, machine)


def parse_cpulist(text, what="CPU list"):
    """'0-3,8,10-11' (the kernel's cpulist format) -> sorted list of ints. Empty text -> []."""
    text = (text or "").strip()
    if not text:
        return []
    cpus = set()
    for item in text.split(","):
        match = _CPULIST_ITEM.match(item.strip())
        if not match:
            raise HostFactsError("%s is not a CPU list such as 0-3,8: %r" % (what, text))
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise HostFactsError("%s has a descending range %r: %r" % (what, item.strip(), text))
        if match.group(3) is not None:
            used, group = int(match.group(3)), int(match.group(4))
            if group == 0 or used > group:
                raise HostFactsError("%s has a bad stride %r: %r" % (what, item.strip(), text))
            cpus.update(cpu for cpu in range(first, last + 1) if (cpu - first) % group < used)
        else:
            cpus.update(range(first, last + 1))
    return sorted(cpus)


def format_cpulist(cpus):
    """Sorted ints -> the kernel's compact form, '0-3,8'."""
    ranges = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in ranges)


def parse_cpuinfo(text):
    """/proc/cpuinfo -> list of per-processor dicts (keys lower-cased), plus a header dict.

    Old arm64 kernels print a 'Processor : AArch64 Processor rev 1 (aarch64)' line and shared
    'Hardware' lines outside the per-CPU blocks; those end up in the header.
    """
    processors = []
    header = {}
    current = None
    for line in (text or "").splitlines():
        if not line.strip():
            current = None
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        value = value.strip()
        if key == "processor" and value.isdigit():
            current = {"processor": int(value)}
            processors.append(current)
        elif current is not None:
            current[key] = value
        else:
            header[key] = value
    return processors, header


def cpuinfo_architecture(processors, header):
    blocks = processors + [header]
    if any("cpu implementer" in block for block in blocks):
        return "aarch64"
    if any("vendor_id" in block or "flags" in block for block in blocks):
        return "x86_64"
    return None


def _hex(value):
    try:
        return int(value, 16)
    except (TypeError, ValueError):
        return None


def parse_meminfo(text):
    """/proc/meminfo or a node's meminfo -> {field: KiB}. Node files prefix lines with 'Node N'."""
    values = {}
    for line in (text or "").splitlines():
        match = re.match(r"^(?:Node\s+\d+\s+)?([A-Za-z_()0-9]+):\s+(\d+)(?:\s+kB)?\s*$", line.strip())
        if match:
            values[match.group(1)] = int(match.group(2))
    return values


def parse_selected_mode(text):
    """'always [madvise] never' -> 'madvise'; None when no mode is selected."""
    match = re.search(r"\[([^\]]+)\]", text or "")
    return match.group(1) if match else None


def parse_smbios_strings(raw):
    """SMBIOS structure bytes (as in /sys/firmware/dmi/entries/4-0/raw) -> list of its strings."""
    if len(raw) < 2 or raw[1] > len(raw):
        return []
    strings = raw[raw[1]:].split(b"\x00")
    result = []
    for item in strings:
        if not item:
            break
        result.append(item.decode("latin-1").strip())
    return result


def smbios_processor(raw):
    """Processor manufacturer and version from an SMBIOS type 4 structure, or {}."""
    if len(raw) < 0x11 or raw[0] != 4:
        return {}
    strings = parse_smbios_strings(raw)

    def pick(index):
        return strings[index - 1] if 0 < index <= len(strings) else None

    return {"processor_manufacturer": pick(raw[0x07]), "processor_version": pick(raw[0x10])}


def _identify_arm(processors, header, warnings):
    pairs = {}
    for block in processors or [header]:
        pair = (_hex(block.get("cpu implementer")), _hex(block.get("cpu part")))
        if pair != (None, None):
            pairs[pair] = pairs.get(pair, 0) + 1
    if not pairs:
        warnings.append("/proc/cpuinfo names no CPU implementer/part: the CPU model is unknown.")
        return {"implementer": None, "part": None, "vendor": None, "microarchitecture": None, "model_name": None}
    (implementer, part), dummy = max(pairs.items(), key=lambda item: item[1])
    if len(pairs) > 1:
        warnings.append(
            "CPUs of different kinds on one host (%s): facts describe the most common one; features are "
            "those every CPU has." % ", ".join("0x%x/0x%03x" % pair for pair in sorted(pairs, key=str))
        )
    uarch, name = PARTS.get((implementer, part), (None, None))
    if uarch is None:
        warnings.append(
            "CPU implementer 0x%x part 0x%03x is not in this collection's table: tuning uses its features only."
            % (implementer or 0, part or 0)
        )
    return {
        "implementer": "0x%02x" % implementer if implementer is not None else None,
        "part": "0x%03x" % part if part is not None else None,
        "vendor": IMPLEMENTERS.get(implementer),
        "microarchitecture": uarch,
        "model_name": name,
        "_implementer_code": implementer,
    }


def _common_features(processors, header, key):
    sets = [set(block[key].split()) for block in processors if key in block]
    if not sets and key in header:
        sets = [set(header[key].split())]
    if not sets:
        return []
    return sorted(set.intersection(*sets))


def name_platform(machine, cpu, dmi):
    """Return (platform or None, evidence text or None, candidate platforms)."""
    uarch = cpu.get("microarchitecture")
    version = " ".join(filter(None, [dmi.get("processor_manufacturer"), dmi.get("processor_version")]))
    for pattern, name in _PROCESSOR_PLATFORMS:
        match = pattern.search(version)
        if match and machine == "aarch64":
            return name(match), "SMBIOS processor %r" % version, []
    vendor = (dmi.get("sys_vendor") or "").strip().lower()
    for (cloud, core), name in _CLOUD_PLATFORMS.items():
        if uarch == core and vendor.startswith(cloud):
            product = dmi.get("product_name")
            return name, "DMI sys_vendor %r%s with a %s CPU" % (
                dmi.get("sys_vendor"), " (product %r)" % product if product else "", cpu.get("model_name")), []
    code = cpu.get("_implementer_code")
    if code in _IMPLEMENTER_PLATFORMS:
        return _IMPLEMENTER_PLATFORMS[code], "CPU implementer 0x%x (%s designs only this family)" % (
            code, IMPLEMENTERS[code]), []
    return None, None, list(_CANDIDATES.get(uarch, []))


def _node_facts(nodes, online, usable, meminfo, warnings):
    if not nodes:
        warnings.append(
            "No NUMA information (/sys/devices/system/node is missing): the host is treated as one node "
            "holding every online CPU and all memory."
        )
        nodes = {0: {"cpus": format_cpulist(online), "memory_kib": meminfo.get("MemTotal")}}
    result = []
    in_nodes = set()
    for node_id in sorted(nodes):
        node = nodes[node_id]
        listed = parse_cpulist(node.get("cpus"), "NUMA node %d cpulist" % node_id)
        in_nodes.update(listed)
        cpus = [cpu for cpu in listed if cpu in online]
        usable_cpus = [cpu for cpu in cpus if cpu in usable]
        memory_kib = node.get("memory_kib")
        result.append({
            "id": node_id,
            "cpus": format_cpulist(cpus),
            "cpu_count": len(cpus),
            "usable_cpus": format_cpulist(usable_cpus),
            "usable_cpu_count": len(usable_cpus),
            "memory_mib": memory_kib // 1024 if memory_kib is not None else None,
            "has_cpus": bool(cpus),
            "used_for_binding": bool(usable_cpus),
        })
        if cpus and memory_kib == 0:
            warnings.append(
                "NUMA node %d has CPUs but no memory of its own: its threads allocate from other nodes." % node_id
            )
        elif memory_kib is None:
            warnings.append("The memory of NUMA node %d is unknown." % node_id)
    missing = set(online) - in_nodes
    if missing:
        warnings.append("Online CPUs %s belong to no NUMA node; they are not used for binding."
                        % format_cpulist(missing))
    return result


def build_host_facts(snapshot):
    """Snapshot of the host's files (see read_snapshot) -> the facts dictionary the module returns."""
    warnings = []
    machine = normalize_machine(snapshot.get("machine") or "")
    if not machine:
        raise HostFactsError("The host's machine type (uname -m) is unknown.")
    processors, header = parse_cpuinfo(snapshot.get("cpuinfo"))
    described = cpuinfo_architecture(processors, header)
    if not processors and not header:
        warnings.append("/proc/cpuinfo is empty or unreadable: CPU model and features are unknown, so every "
                        "feature-dependent setting takes its safe value (no bf16).")
    elif described and described != machine:
        warnings.append(
            "/proc/cpuinfo describes an %s CPU while this userspace is %s: the host runs under emulation "
            "(for example qemu-user), so CPU model and features are unknown and no bf16 is assumed."
            % (described, machine))

    matching = described == machine
    if machine == "aarch64":
        cpu = _identify_arm(processors, header, warnings) if matching else {
            "implementer": None, "part": None, "vendor": None, "microarchitecture": None, "model_name": None}
        features = _common_features(processors, header, "features") if matching else []
        key_features = AARCH64_KEY_FEATURES
        bf16 = "bf16" in features
    else:
        first = processors[0] if processors else header
        cpu = {"implementer": None, "part": None, "vendor": first.get("vendor_id") if matching else None,
               "microarchitecture": None, "model_name": first.get("model name") if matching else None}
        features = _common_features(processors, header, "flags") if matching else []
        key_features = X86_KEY_FEATURES
        bf16 = "avx512_bf16" in features or "amx_bf16" in features

    dmi = snapshot.get("dmi") or {}
    platform, evidence, candidates = name_platform(machine, cpu, dmi)
    cpu.pop("_implementer_code", None)
    cpu.update({
        "platform": platform,
        "platform_evidence": evidence,
        "platform_candidates": candidates,
        "cpuinfo_architecture": described,
        "features": features,
        "flags": dict((name, name in features) for name in key_features),
        "bf16": bf16,
    })

    online = parse_cpulist(snapshot.get("online"), "/sys/devices/system/cpu/online")
    if not online:
        online = sorted(block["processor"] for block in processors)
        if online:
            warnings.append("/sys/devices/system/cpu/online is missing: online CPUs are taken from /proc/cpuinfo.")
    if not online:
        raise HostFactsError("Cannot tell which CPUs are online: /sys/devices/system/cpu/online and "
                             "/proc/cpuinfo are both missing or empty.")
    present = parse_cpulist(snapshot.get("present"), "/sys/devices/system/cpu/present") or online
    affinity = snapshot.get("affinity")
    usable = [cpu_id for cpu_id in online if affinity is None or cpu_id in affinity]
    if not usable:
        raise HostFactsError("No online CPU is usable by this process: online %s, allowed %s."
                             % (format_cpulist(online), format_cpulist(affinity or [])))

    meminfo = parse_meminfo(snapshot.get("meminfo"))
    nodes = _node_facts(snapshot.get("nodes"), online, usable, meminfo, warnings)
    total = meminfo.get("MemTotal")
    node_mib = sum(node["memory_mib"] or 0 for node in nodes)
    if total is None:
        total = node_mib * 1024 or None
        warnings.append("/proc/meminfo has no MemTotal: total memory is %s." % (
            "the sum of the NUMA nodes' memory" if total else "unknown"))
    available = meminfo.get("MemAvailable")
    if total and node_mib and abs(node_mib * 1024 - total) > total * 0.1:
        warnings.append(
            "The NUMA nodes report %d MiB of memory but /proc/meminfo %d MiB: per-node budgets (KV cache) use "
            "the nodes' figures." % (node_mib, total // 1024))

    facts = {
        "architecture": machine,
        "cpu": cpu,
        "cpus": {
            "online": format_cpulist(online),
            "online_count": len(online),
            "offline": format_cpulist(set(present) - set(online)),
            "usable": format_cpulist(usable),
            "usable_count": len(usable),
            "restricted": len(usable) < len(online),
        },
        "numa_nodes": nodes,
        "binding_nodes": [node["id"] for node in nodes if node["used_for_binding"]],
        "memory": {
            "total_mib": total // 1024 if total is not None else None,
            "available_mib": available // 1024 if available is not None else None,
        },
        "transparent_hugepages": {
            "enabled": parse_selected_mode(snapshot.get("thp_enabled")),
            "defrag": parse_selected_mode(snapshot.get("thp_defrag")),
        },
        "warnings": warnings,
    }
    return facts


def _read(root, path, binary=False):
    try:
        with open(os.path.join(root, path.lstrip("/")), "rb" if binary else "r") as handle:
            return handle.read()
    except (IOError, OSError, UnicodeDecodeError):
        return None


def read_snapshot(root="/", affinity=None, machine=None):
    """Read everything build_host_facts needs from a live system (or a copy of its files under root)."""
    node_dir = os.path.join(root, "sys/devices/system/node")
    nodes = {}
    if os.path.isdir(node_dir):
        for entry in os.listdir(node_dir):
            match = re.match(r"^node(\d+)$", entry)
            if not match:
                continue
            base = "sys/devices/system/node/%s/" % entry
            meminfo = parse_meminfo(_read(root, base + "meminfo"))
            nodes[int(match.group(1))] = {
                "cpus": _read(root, base + "cpulist") or "",
                "memory_kib": meminfo.get("MemTotal"),
            }
    dmi = {}
    for field in ("sys_vendor", "product_name", "board_vendor", "board_name"):
        value = _read(root, "sys/class/dmi/id/" + field)
        if value is not None and value.strip():
            dmi[field] = value.strip()
    raw = _read(root, "sys/firmware/dmi/entries/4-0/raw", binary=True)
    if raw:
        dmi.update((key, value) for key, value in smbios_processor(raw).items() if value)
    return {
        "machine": machine or os.uname()[4],
        "cpuinfo": _read(root, "proc/cpuinfo"),
        "online": _read(root, "sys/devices/system/cpu/online"),
        "present": _read(root, "sys/devices/system/cpu/present"),
        "affinity": affinity,
        "nodes": nodes or None,
        "meminfo": _read(root, "proc/meminfo"),
        "thp_enabled": _read(root, "sys/kernel/mm/transparent_hugepage/enabled"),
        "thp_defrag": _read(root, "sys/kernel/mm/transparent_hugepage/defrag"),
        "dmi": dmi,
    }


def free_bytes(path):
    """Bytes an unprivileged writer may still use on the filesystem of `path`, or of its nearest
    existing parent (on a fresh host the directory a role will make is not there yet)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize
