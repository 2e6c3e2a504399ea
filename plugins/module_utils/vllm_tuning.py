# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM CPU settings computed from host facts (see host_facts.build_host_facts).

Every rule here names its reason; the sources are listed in docs/tuning.md. Each function takes an
optional user override, validates it against the host and raises TuningError naming the variable
the operator set, so a bad value stops the play before anything on the host changes.
"""

from __future__ import annotations

import math

from ansible_collections.arm_inference.vllm.plugins.module_utils.input_message import input_message
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import (
    HostFactsError,
    format_cpulist,
    parse_cpulist,
)


class TuningError(ValueError):
    """A setting cannot be computed or an override does not fit the host."""


GIB_MIB = 1024
GIB_BYTES = 1024 ** 3
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
DTYPES = ("auto", "bfloat16", "float16", "float32")
FPMATH_MODES = ("strict", "bf16", "f16", "tf32", "any")
BIND_KEYWORDS = ("auto", "nobind")


def _usable_nodes(facts):
    nodes = [node for node in facts["numa_nodes"] if node["used_for_binding"]]
    if not nodes:
        raise TuningError("No NUMA node has a CPU this host lets the service use (usable CPUs: %s)."
                          % facts["cpus"]["usable"])
    return nodes


def _describe_nodes(nodes):
    return ", ".join("node %d: CPUs %s" % (node["id"], node["usable_cpus"]) for node in nodes)


def _refuse(variable, problem, got=None, fix="", got_text=None):
    raise TuningError(input_message(variable, problem, got, fix, got_text=got_text))


def _convert(value, variable, convert, noun):
    if isinstance(value, bool):
        _refuse(variable, "must be %s" % noun, value, "give %s" % noun)
    try:
        return convert(value)
    except (TypeError, ValueError):
        _refuse(variable, "must be %s" % noun, value, "give %s" % noun)


def _positive_int(value, variable, allow_zero=False):
    number = _convert(value, variable, int, "an integer")
    least = "0 or more" if allow_zero else "1 or more"
    if number != value and str(number) != str(value).strip():
        _refuse(variable, "must be a whole number", value, "give a whole number of %s" % least)
    if number < 0 or (number == 0 and not allow_zero):
        _refuse(variable, "must be %s" % least, value, "give a whole number of %s" % least)
    return number


def _number(value, variable, minimum=0.0):
    number = _convert(value, variable, float, "a number")
    if math.isnan(number) or number < minimum:
        _refuse(variable, "must be a number >= %s" % minimum, value, "give a number of %s or more" % minimum)
    return number


number = _number
positive_int = _positive_int


def tensor_parallel_size(facts, instances=1, override=None, variable="vllm_serve_tensor_parallel_size"):
    """Ranks per instance: by default the NUMA nodes with usable CPUs shared out among the instances.

    vLLM binds each rank's threads (and memory) inside one NUMA node, so a rank never spans nodes.
    Several ranks may share a node only when every node holds the same number of them.
    """
    instances = _positive_int(instances, "number of instances")
    nodes = _usable_nodes(facts)
    if override in (None, ""):
        return max(1, len(nodes) // instances)
    size = _positive_int(override, variable)
    ranks = size * instances
    if ranks > len(nodes) and ranks % len(nodes):
        fitting = [n for n in range(1, 4 * len(nodes) + 1)
                   if n * instances <= len(nodes) or (n * instances) % len(nodes) == 0]
        _refuse(variable, "does not fit: %d instance(s) x %d ranks cannot be spread evenly over this host's %d NUMA "
                "node(s) with usable CPUs (%s)" % (instances, size, len(nodes), _describe_nodes(nodes)), size,
                "use a size that fits: %s" % ", ".join(str(n) for n in fitting[:8]))
    return size


def _rank_cpus(facts, instances, tp_size, reserved, with_reserved=False):
    """CPUs of every rank of every instance: [[rank0 cpus, rank1 cpus], ...], reserved CPUs removed
    unless with_reserved."""
    nodes = _usable_nodes(facts)
    ranks = instances * tp_size
    if ranks <= len(nodes):
        chunks = [parse_cpulist(node["usable_cpus"]) for node in nodes[:ranks]]
    else:
        per_node = ranks // len(nodes)
        chunks = []
        for node in nodes:
            cpus = parse_cpulist(node["usable_cpus"])
            size = len(cpus) // per_node
            if size <= reserved:
                _refuse("vllm_serve_instances", "%d ranks on NUMA node %d leave %d CPU(s) each, not more than the %d "
                        "reserved per rank" % (per_node, node["id"], size, reserved),
                        got_text="%d instance(s) of tensor-parallel size %d" % (instances, tp_size),
                        fix="use fewer instances or a smaller tensor-parallel size")
            chunks.extend(cpus[index * size:(index + 1) * size] for index in range(per_node))
    bound = []
    for chunk in chunks:
        if len(chunk) <= reserved:
            _refuse("vllm_serve_reserved_cpus_per_rank", "leaves no CPU for OpenMP threads on a rank of %d CPU(s) (%s)"
                    % (len(chunk), format_cpulist(chunk)), reserved,
                    "reserve fewer CPUs per rank than a rank has, or use fewer instances")
        # The last CPUs of each rank stay free for the API server and tokenizer, as in vLLM's docs
        # (bind 0-30 on a 32-core host).
        bound.append(chunk[:len(chunk) - reserved] if reserved and not with_reserved else chunk)
    return [bound[index * tp_size:(index + 1) * tp_size] for index in range(instances)]


def validate_bind(facts, bind, tp_size, variable="vllm_serve_omp_threads_bind"):
    """Check a user's VLLM_CPU_OMP_THREADS_BIND: CPUs exist and are usable, each rank inside one node."""
    text = str(bind).strip()
    if text in BIND_KEYWORDS:
        if text == "auto" and tp_size > len(_usable_nodes(facts)):
            _refuse(variable, "auto needs one NUMA node per rank, but tensor-parallel size %d exceeds the %d node(s) "
                    "with usable CPUs" % (tp_size, len(_usable_nodes(facts))), text,
                    "give CPU lists such as 0-30|32-62, or a smaller tensor_parallel_size")
        return text
    groups = text.split("|")
    if len(groups) != tp_size:
        _refuse(variable, "has %d '|'-separated group(s); it needs one per tensor-parallel rank (%d)"
                % (len(groups), tp_size), text, "give %d CPU lists separated by |" % tp_size)
    usable = set(parse_cpulist(facts["cpus"]["usable"]))
    node_of = {}
    for node in _usable_nodes(facts):
        for cpu in parse_cpulist(node["usable_cpus"]):
            node_of[cpu] = node["id"]
    seen = set()
    for index, group in enumerate(groups):
        try:
            cpus = parse_cpulist(group, "%s group %d" % (variable, index))
        except HostFactsError as error:
            _refuse(variable, "must be 'auto', 'nobind' or CPU lists like 0-30|32-62 (%s)" % error, text,
                    "correct the CPU list")
        if not cpus:
            _refuse(variable, "has an empty group %d" % index, text, "give every rank's group its CPUs")
        foreign = [cpu for cpu in cpus if cpu not in usable]
        if foreign:
            _refuse(variable, "names CPUs %s that this host does not have or does not let the service use"
                    % format_cpulist(foreign), text, "use only the usable CPUs: %s" % facts["cpus"]["usable"])
        spanned = sorted(set(node_of[cpu] for cpu in cpus))
        if len(spanned) > 1:
            _refuse(variable, "group %d (%s) spans NUMA nodes %s" % (index, group, ", ".join(str(n) for n in spanned)),
                    text, "keep each rank's CPUs in one NUMA node")
        if seen & set(cpus):
            _refuse(variable, "binds CPUs %s to more than one rank" % format_cpulist(seen & set(cpus)), text,
                    "give each rank CPUs of its own")
        seen.update(cpus)
    return "|".join(format_cpulist(parse_cpulist(group)) for group in groups)


def _node_of_cpu(facts, cpu):
    for node in facts["numa_nodes"]:
        if cpu in parse_cpulist(node["cpus"]):
            return node
    return None


def headroom(share_gib, override=None, variable="vllm_serve_memory_headroom_gib"):
    """Memory per rank kept free of weights and KV cache: the override, else 10 % of the rank's
    share of its node, at least 1 GiB."""
    return max(1.0, share_gib * 0.1) if override in (None, "") else _number(override, variable)


def ranks_per_node(facts, instances, tp_size):
    """How many ranks share each NUMA node the layout uses (1 while there are enough nodes)."""
    ranks = instances * tp_size
    node_count = len(_usable_nodes(facts))
    return max(1, ranks // node_count) if ranks > node_count else 1


def rank_layout(facts, instances, tp_size):
    """[(node, ranks on it)] for the NUMA nodes the instances' ranks occupy."""
    per_node = ranks_per_node(facts, instances, tp_size)
    nodes = _usable_nodes(facts)
    used = min(len(nodes), int(math.ceil(instances * tp_size / float(per_node))))
    return [(node, per_node) for node in nodes[:used]]


def kv_cache_gib(facts, rank_cpus, tp_size, node_ranks, weights_gib, headroom_gib=None, floor_gib=1,
                 override=None, variable="vllm_serve_kv_cache_gib"):
    """KV cache per rank of one instance, in whole GiB (vLLM gets it as --kv-cache-memory-bytes).

    Each rank allocates this much KV cache next to its share of the weights in its own NUMA node
    (a rank that outgrows its node is killed: vLLM issue 29233 / exit code 9), so the budget is the
    smallest node share: node memory / ranks on it - weights / TP - headroom. The headroom defaults
    to 10 % of the share (vLLM reserves 90 % of node memory when it sizes the cache itself), at least
    1 GiB, for activations, the Python process and the page cache.
    """
    weights = _number(weights_gib, "model weights (GiB)")
    budgets = []
    for cpus in rank_cpus:
        node = _node_of_cpu(facts, cpus[0]) if cpus else None
        if (node is None or node["memory_mib"] is None) and override not in (None, ""):
            # Nothing to check the user's size against: the host does not tell its node memory.
            return _positive_int(override, variable)
        if node is None or not node["memory_mib"]:
            _refuse(variable, "cannot be sized: the NUMA node of CPU %s reports no memory" % (cpus[0] if cpus else "?"),
                    override, "set it to the KV cache size in GiB per rank")
        share = node["memory_mib"] / float(GIB_MIB) / node_ranks
        kept = headroom(share, headroom_gib)
        budgets.append((share - weights / tp_size - kept, node["id"], share, kept))
    budget, node_id, share, kept = min(budgets)
    explain = ("NUMA node %d gives each rank %.1f GiB; weights take %.1f GiB per rank and the headroom %.1f GiB"
               % (node_id, share, weights / tp_size, kept))
    if override not in (None, ""):
        value = _positive_int(override, variable)
        if value > budget:
            _refuse(variable, "does not fit: %s, leaving %.1f GiB for the KV cache" % (explain, max(budget, 0)), value,
                    "set it to %d or less, or leave it empty to size it from the host" % max(int(budget), 0))
        return value
    floor = _positive_int(floor_gib, "vllm_serve_kv_cache_min_gib")
    value = int(math.floor(budget))
    if value < floor:
        _refuse("vllm_serve_kv_cache_min_gib", "the KV cache would get %d GiB, below the floor of %d GiB: %s"
                % (max(value, 0), floor, explain), floor_gib,
                "use a smaller model, fewer instances, or set %s" % variable)
    return value


def max_jobs(facts, gib_per_job=2, override=None, variable="vllm_build_max_jobs", per_job_variable="vllm_build_gib_per_job"):
    """MAX_JOBS for the vLLM compile: one job per usable CPU, but no more than memory allows.

    Too many parallel compiles is the classic cause of 'Killed' builds (vLLM issues 8878, 3180).
    Available memory is used when known, since the build shares the host with what already runs.
    """
    if override not in (None, ""):
        return _positive_int(override, variable)
    per_job = _number(gib_per_job, per_job_variable, minimum=0.25)
    memory = facts["memory"]["available_mib"] or facts["memory"]["total_mib"]
    if not memory:
        _refuse(variable, "cannot be derived: the host's memory is unknown", override,
                "set it to the number of parallel compile jobs")
    by_memory = int(memory / float(GIB_MIB) // per_job)
    return max(1, min(facts["cpus"]["usable_count"], by_memory))


# OpenMP variables that GNU nproc honours: OMP_NUM_THREADS replaces the CPU count, OMP_THREAD_LIMIT caps it.
OMP_COUNT_VARIABLES = ("OMP_NUM_THREADS", "OMP_THREAD_LIMIT")


def _omp_count(value):
    """An OpenMP thread count as nproc reads it: the first number of a list such as '8,4'; None when unset or 0."""
    text = str(value if value is not None else "").partition(",")[0].strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def nproc(usable_cpus, environment):
    """What GNU nproc prints in environment: OMP_NUM_THREADS instead of the usable CPUs when set, capped by
    OMP_THREAD_LIMIT (coreutils' nproc.c)."""
    wanted = _omp_count(environment.get("OMP_NUM_THREADS"))
    limit = _omp_count(environment.get("OMP_THREAD_LIMIT"))
    count = wanted if wanted else usable_cpus
    return min(count, limit) if limit else count


def acl_build_jobs(facts, build_jobs, gib_per_job=2, environment=None, variable="vllm_build_environment",
                   per_job_variable="vllm_build_gib_per_job"):
    """The Arm Compute Library step of vLLM's aarch64 build: its compile jobs, and the environment that caps them.

    vLLM's cmake/cpu_extension.cmake (0.32/0.33) builds ACL with `cmake --build -j${NPROC}` where NPROC
    comes from CMake's ProcessorCount, i.e. `nproc`: MAX_JOBS never reaches it, so a host sized for
    MAX_JOBS compiles would run one ACL job per CPU and can be OOM-killed. nproc honours
    OMP_THREAD_LIMIT, so the role sets it to MAX_JOBS for the build; the user's environment
    (vllm_build_environment, applied after it) may change that, and is then checked against memory.
    Returns {"jobs": ACL compile jobs, "environment": what the role adds}; jobs is None off aarch64.
    """
    if not isinstance(environment or {}, dict):
        # Only the value's type is shown: an environment given as text may carry a token.
        _refuse(variable, "must be a mapping of environment variables", fix="write NAME: value pairs",
                got_text="a %s" % type(environment).__name__)
    user = dict(environment or {})
    if facts["architecture"] != "aarch64":
        return {"jobs": None, "environment": {}}
    jobs = _positive_int(build_jobs, "MAX_JOBS")
    added = {"OMP_THREAD_LIMIT": str(jobs)}
    acl_jobs = nproc(facts["cpus"]["usable_count"], dict(added, **{key: str(value) for key, value in user.items()}))
    set_by_user = dict((name, user[name]) for name in OMP_COUNT_VARIABLES if name in user)
    memory = facts["memory"]["available_mib"] or facts["memory"]["total_mib"]
    per_job = _number(gib_per_job, per_job_variable, minimum=0.25)
    if set_by_user and memory and acl_jobs > jobs:
        fitting = max(1, int(memory / float(GIB_MIB) // per_job))
        if acl_jobs * per_job > memory / float(GIB_MIB):
            _refuse(variable, "%s makes the Arm Compute Library step of vLLM's build run %d compile jobs (it follows "
                    "nproc, not MAX_JOBS), %.0f GiB at %s GiB each, but the host has %.1f GiB available" % (
                        " and ".join(sorted(set_by_user)), acl_jobs, acl_jobs * per_job, per_job,
                        memory / float(GIB_MIB)),
                    fix="remove them from %s or set OMP_THREAD_LIMIT to %d or less" % (variable, fitting),
                    got_text=", ".join("%s=%s" % item for item in sorted(set_by_user.items())))
    return {"jobs": acl_jobs, "environment": added}


def dtype(facts, override=None, variable="vllm_serve_dtype"):
    """bfloat16 where the CPU has bf16 (vLLM's recommended CPU dtype), float32 where it does not."""
    if override in (None, ""):
        return "bfloat16" if facts["cpu"]["bf16"] else "float32"
    value = str(override)
    aliases = {"half": "float16", "float": "float32"}
    value = aliases.get(value, value)
    if value not in DTYPES:
        _refuse(variable, "is not one of %s" % ", ".join(DTYPES), override, "pick one of them")
    if value == "bfloat16" and not facts["cpu"]["bf16"]:
        _refuse(variable, "bfloat16 needs a CPU with bf16 (Neoverse-V1/V2, AmpereOne); this host's %s has none"
                % _cpu_name(facts), override, "use float32 or a quantized model")
    return value


def fpmath_mode(facts, override=None, variable="vllm_serve_onednn_fpmath_mode"):
    """ONEDNN_DEFAULT_FPMATH_MODE: BF16 only where the CPU has bf16 instructions, otherwise unset (None)."""
    if override in (None, ""):
        return "BF16" if facts["cpu"]["bf16"] else None
    value = str(override).lower()
    if value not in FPMATH_MODES:
        _refuse(variable, "is not one of %s" % ", ".join(FPMATH_MODES), override, "pick one of them")
    if value == "bf16" and not facts["cpu"]["bf16"]:
        _refuse(variable, "bf16 needs a CPU with bf16; this host's %s has none" % _cpu_name(facts), override,
                "leave it empty (BF16 only where the CPU has it) or pick another mode")
    return value.upper()


def _cpu_name(facts):
    cpu = facts["cpu"]
    return cpu.get("model_name") or cpu.get("microarchitecture") or "CPU (unknown model)"


# What vLLM's aarch64 CPU build adds to -march=armv8.2-a+dotprod+fp16 when the build host's
# /proc/cpuinfo lists it (cmake/cpu_extension.cmake, vLLM 0.32/0.33: +bf16, then +i8mm), each also
# compiling kernels only built with it (ARM_BF16_SUPPORT, ARM_I8MM_SUPPORT). There is no runtime
# dispatch on Arm, so each one splits the hosts that may share a wheel. SVE is not compiled for.
AARCH64_OPTIONAL_FEATURES = ("bf16", "i8mm")


def build_class(facts):
    """Which hosts may share one compiled vLLM wheel.

    vLLM's CPU build (cmake/cpu_extension.cmake) reads /proc/cpuinfo on the build host: on aarch64 it
    compiles with -march=armv8.2-a+dotprod+fp16, adding +bf16 and +i8mm when the CPU has them, so a
    wheel from a Neoverse-V1/V2 host would hit illegal instructions on Neoverse-N1. On x86_64 it keys
    on AVX-512, AVX512-BF16, AVX512-VNNI and AMX. The class lists exactly the features that change the
    code.
    """
    arch = facts["architecture"]
    flags = facts["cpu"]["flags"]
    if facts["cpu"]["cpuinfo_architecture"] != arch:
        return "%s-unknown-cpu" % arch
    if arch == "aarch64":
        if not (flags.get("asimd") and flags.get("asimddp") and flags.get("asimdhp")):
            return "aarch64-unsupported-no-dotprod-fp16"
        return "-".join(["aarch64-dotprod-fp16"] + [name for name in AARCH64_OPTIONAL_FEATURES if flags.get(name)])
    if arch == "x86_64":
        parts = [name for name in ("avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16") if flags.get(name)]
        if not parts:
            parts = ["avx2"] if flags.get("avx2") else ["baseline"]
        return "x86_64-" + "-".join(part.replace("_", "") for part in parts)
    return "%s-unknown-cpu" % arch


def class_features(build_class):
    """The architecture and the CPU features a build class names: "aarch64-dotprod-fp16-bf16" ->
    ("aarch64", ["dotprod", "fp16", "bf16"]); ("", []) for an empty or unknown class."""
    if not build_class or "-unknown-" in build_class or "-unsupported-" in build_class:
        return "", []
    arch, dummy, rest = str(build_class).partition("-")
    return arch, [name for name in rest.split("-") if name and name != "baseline"]


def missing_features(release_class, host_class):
    """The CPU features a release's build class needs that a host's class lacks, in the release's order;
    None when the classes cannot be compared (either unknown, or another architecture)."""
    release_arch, needed = class_features(release_class)
    host_arch, present = class_features(host_class)
    if not release_arch or release_arch != host_arch:
        return None
    # An x86_64 class lists avx2 only where it has no AVX-512: every AVX-512 CPU has AVX2.
    if host_arch == "x86_64" and "avx512f" in present:
        present = present + ["avx2"]
    return [name for name in needed if name not in present]


def estimate_weights_gib(params_billion, model_dtype):
    """Weights of a dense model: parameters x bytes per parameter of the serving dtype."""
    params = _number(params_billion, "model parameters (billions)")
    return params * 1e9 * DTYPE_BYTES.get(model_dtype, 4) / float(1024 ** 3)


def _weights_source(item, summary):
    if item.get("model_weights_gib") not in (None, ""):
        return "model_weights_gib"
    if item.get("model_params_billion") not in (None, ""):
        return "model_params_billion"
    return "files" if summary else None


def _model_rules(facts, summary, item, variable):
    """Settings a checkpoint needs (module_utils/vllm_model_info.serving_rules); refuses one vLLM's
    CPU backend cannot serve on this host's architecture."""
    if not summary:
        return {"dtype": None, "reasons": []}
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_info
    try:
        return vllm_model_info.serving_rules(summary, facts)
    except vllm_model_info.ModelInfoError as error:
        _refuse(variable + ".model", " ".join(str(error).split()), item.get("model_label") or summary.get("path"),
                "serve an unquantized, INT8 W8A8 or INT4 W4A8 checkpoint")


def model_weights_gib(item, summary, model_dtype, variable):
    """GiB the weights take in memory: the user's model_weights_gib, else the model's own files
    (vllm_model_info.memory_weight_bytes at the serving dtype), else model_params_billion x bytes
    per parameter. A model none of these weighs is refused: sizing it as weightless would give the
    KV cache the weights' memory and get the worker OOM-killed at load."""
    if item.get("model_weights_gib") not in (None, ""):
        return _number(item["model_weights_gib"], variable + ".model_weights_gib")
    if summary:
        from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_info
        return vllm_model_info.memory_weight_bytes(summary, model_dtype) / float(GIB_BYTES)
    if item.get("model_params_billion") not in (None, ""):
        return estimate_weights_gib(_number(item["model_params_billion"], variable + ".model_params_billion"),
                                    model_dtype)
    _refuse(variable, "the model's weights are unknown, so the KV cache cannot be sized (no model files read, no "
            "size given)", item.get("model_label"), "serve a model from vllm_model_models or a local directory, "
            "or set %s.model_weights_gib or %s.model_params_billion" % (variable, variable))


# CPUs at the end of each rank's range left to the API server when the operator sets none (docs/tuning.md).
RESERVED_CPUS_PER_RANK = 1


def model_serving(facts, summary, item, variable):
    """(dtype, weights GiB in memory) an instance serves a checkpoint with on this host: the checkpoint's own
    rules (quantization support, the dtype it needs), the instance's dtype (item["dtype"]) or the host's, and the
    weights at that dtype. Refuses what vLLM's CPU backend cannot serve here. serve_profile() sizes every instance
    with it, and vllm_model's fit check weighs a revision with it from its small files before the download."""
    rules = _model_rules(facts, summary, item, variable)
    model_dtype = dtype(facts, item.get("dtype") if item.get("dtype") not in (None, "") else rules["dtype"],
                        variable + ".dtype")
    return model_dtype, model_weights_gib(item, summary, model_dtype, variable)


def serve_profile(facts, instances=None, reserved_cpus_per_rank=None, kv_cache_min_gib=1, memory_headroom_gib=None):
    """Settings of every vLLM instance on the host.

    instances: list of dicts with optional keys name, tensor_parallel_size, omp_threads_bind,
    kv_cache_gib, dtype, onednn_fpmath_mode, model_weights_gib, model_params_billion, and
    model_summary (vllm_model_info.summarize() of the model's directory) and model_label (the
    model as the user named it, for messages). Every instance needs a size: model_weights_gib,
    model_params_billion or model_summary.
    Returns one dict per instance with the values and the environment the unit gets.
    """
    instances = instances or [{}]
    if not isinstance(instances, list) or not all(isinstance(item, dict) for item in instances):
        _refuse("vllm_serve_instances", "must be a list of mappings (one per vLLM server)", instances,
                "give one mapping per server")
    reserved = RESERVED_CPUS_PER_RANK if reserved_cpus_per_rank in (None, "") else \
        _positive_int(reserved_cpus_per_rank, "vllm_serve_reserved_cpus_per_rank", allow_zero=True)
    names = [item.get("name") or "vllm-%d" % index for index, item in enumerate(instances)]
    if len(set(names)) != len(names):
        _refuse("vllm_serve_instances", "has duplicate names: %s" % ", ".join(names), names,
                "give every instance its own name")
    sizes = [tensor_parallel_size(facts, len(instances), item.get("tensor_parallel_size"),
                                  "vllm_serve_instances[%d].tensor_parallel_size" % index)
             for index, item in enumerate(instances)]
    if len(set(sizes)) != 1:
        _refuse("vllm_serve_instances", "all instances on one host must use the same tensor_parallel_size (the "
                "host's NUMA nodes are shared out evenly)", sizes, "give every instance the same tensor_parallel_size")
    tp_size = sizes[0]
    node_ranks = ranks_per_node(facts, len(instances), tp_size)
    computed = _rank_cpus(facts, len(instances), tp_size, reserved)
    occupied = _rank_cpus(facts, len(instances), tp_size, reserved, with_reserved=True)
    profiles = []
    claimed = {}
    for index, item in enumerate(instances):
        variable = "vllm_serve_instances[%d]" % index
        # The CPUs the whole instance may run on (its ranks plus their reserved CPUs); only known
        # when the layout is computed, a user's own bind string says nothing about the rest.
        instance_cpus = ""
        if item.get("omp_threads_bind") not in (None, ""):
            bind = validate_bind(facts, item["omp_threads_bind"], tp_size, variable + ".omp_threads_bind")
            rank_cpus = computed[index] if bind in BIND_KEYWORDS else [parse_cpulist(g) for g in bind.split("|")]
        else:
            rank_cpus = computed[index]
            bind = "|".join(format_cpulist(cpus) for cpus in rank_cpus)
            instance_cpus = format_cpulist(sorted(cpu for cpus in occupied[index] for cpu in cpus))
        if bind not in BIND_KEYWORDS:
            for cpu in (cpu for cpus in rank_cpus for cpu in cpus):
                if claimed.setdefault(cpu, names[index]) != names[index]:
                    _refuse(variable + ".omp_threads_bind", "binds CPU %d, which instance %s already uses"
                            % (cpu, claimed[cpu]), bind, "give each instance CPUs of its own")
        summary = item.get("model_summary")
        model_dtype, weights = model_serving(facts, summary, item, variable)
        kv = kv_cache_gib(facts, rank_cpus, tp_size, node_ranks, weights, memory_headroom_gib,
                          kv_cache_min_gib, item.get("kv_cache_gib"), variable + ".kv_cache_gib")
        fpmath = fpmath_mode(facts, item.get("onednn_fpmath_mode"), variable + ".onednn_fpmath_mode")
        env = {
            "VLLM_CPU_OMP_THREADS_BIND": bind,
            "VLLM_CPU_NUM_OF_RESERVED_CPU": str(reserved),
        }
        if fpmath:
            env["ONEDNN_DEFAULT_FPMATH_MODE"] = fpmath
        profiles.append({
            "name": names[index],
            "tensor_parallel_size": tp_size,
            "omp_threads_bind": bind,
            "omp_threads": sum(len(cpus) for cpus in rank_cpus),
            "instance_cpus": instance_cpus,
            "reserved_cpus_per_rank": reserved,
            "kv_cache_gib": kv,
            "model_weights_gib": round(weights, 2),
            "dtype": model_dtype,
            "onednn_fpmath_mode": fpmath,
            "environment": env,
            "model_weights_source": _weights_source(item, summary),
            "quantization": (summary or {}).get("quantization"),
            # The KV size reaches vLLM as --kv-cache-memory-bytes: vLLM 0.32 and 0.33 read it on CPU
            # (cpu_worker.py determine_available_memory) and call VLLM_CPU_KVCACHE_SPACE a legacy
            # setting that, when set, overrides the flag (platforms/cpu.py "Legacy setting").
            "arguments": ["--dtype", model_dtype, "--tensor-parallel-size", str(tp_size),
                          "--kv-cache-memory-bytes", str(kv * GIB_BYTES)]
            + (["--distributed-executor-backend", "mp"] if tp_size > 1 else []),
        })
    return profiles
