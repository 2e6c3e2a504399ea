"""Golden renderings: what each published sample host gets from the tuning rules.

`python3 tests/unit/tuning_golden.py --write` (or `make golden`) rewrites the checked-in files:
tests/unit/plugins/module_utils/golden/<sample>.txt and the table in docs/tuning.md between its
markers. test_vllm_tuning_golden.py fails when either differs from what the code computes now.
"""

from __future__ import annotations

import sys
from pathlib import Path

UNIT_DIR = Path(__file__).resolve().parent
REPO_ROOT = UNIT_DIR.parents[1]
GOLDEN_DIR = UNIT_DIR / "plugins" / "module_utils" / "golden"
DOCS = REPO_ROOT / "docs" / "tuning.md"
TABLE_BEGIN = "<!-- BEGIN GENERATED TABLE (make golden) -->"
TABLE_END = "<!-- END GENERATED TABLE -->"

# Two model sizes the sources serve on Arm CPUs: Qwen2.5-0.5B (Arm learning path) and
# Llama-3.1-8B (vLLM's own arm64 CPU benchmark configuration), the latter also weighed from the
# published files of a Llama-3.1-8B bf16 checkpoint (tests/unit/samples/models).
FILES_MODEL = "llama-3.1-8b-bf16"
SCENARIOS = (
    ("0.5B-parameter model, one instance", [{"model_params_billion": 0.5}]),
    ("8B-parameter model, one instance", [{"model_params_billion": 8}]),
    ("Llama-3.1-8B bf16 weighed from its files (samples/models/%s), one instance" % FILES_MODEL,
     [{"model_summary": FILES_MODEL}]),
)


def _imports():
    if str(UNIT_DIR) not in sys.path:
        sys.path.insert(0, str(UNIT_DIR))
    import conftest  # noqa: F401  (makes ansible_collections.arm_inference.vllm importable)
    import published_samples
    from ansible_collections.arm_inference.vllm.plugins.module_utils import host_facts, vllm_tuning
    return published_samples, host_facts, vllm_tuning


def compute(name):
    """(facts, [(scenario title, profiles or error text)]) for one sample."""
    samples, host_facts, tuning = _imports()
    import model_samples  # importable once _imports() has put tests/unit on sys.path
    facts = host_facts.build_host_facts(samples.load_sample(name))
    results = []
    scenarios = list(SCENARIOS)
    if len(facts["binding_nodes"]) > 1:
        scenarios.append(("0.5B-parameter model, one instance per NUMA node",
                          [{"name": "node%d" % node, "model_params_billion": 0.5, "tensor_parallel_size": 1}
                           for node in facts["binding_nodes"]]))
    for title, instances in scenarios:
        instances = [dict(item, model_summary=model_samples.summary(item["model_summary"],
                                                                    "/models/%s" % item["model_summary"]))
                     if "model_summary" in item else item for item in instances]
        try:
            results.append((title, tuning.serve_profile(facts, instances)))
        except tuning.TuningError as error:
            results.append((title, "error: %s" % error))
    return facts, results


def _max_jobs(facts):
    dummy_samples, dummy_host_facts, tuning = _imports()
    try:
        return str(tuning.max_jobs(facts))
    except tuning.TuningError:
        return "set by user (memory unknown)"


def render_sample(name):
    dummy_samples, dummy_host_facts, tuning = _imports()
    facts, results = compute(name)
    cpu = facts["cpu"]
    platform = cpu["platform"] or "not named (could be: %s)" % (", ".join(cpu["platform_candidates"]) or "unknown")
    lines = [
        "# Sample %s: tests/unit/samples/%s/SOURCE.md says where it was published." % (name, name),
        "# Regenerate with: make golden",
        "cpu: %s (%s)" % (cpu["model_name"] or "unknown model", cpu["microarchitecture"] or "-"),
        "platform: %s" % platform,
        "platform evidence: %s" % (cpu["platform_evidence"] or "-"),
        "bf16: %s" % ("yes" if cpu["bf16"] else "no"),
        "usable CPUs: %s (%d)" % (facts["cpus"]["usable"], facts["cpus"]["usable_count"]),
        "NUMA nodes: %s" % "; ".join(
            "%d: CPUs %s, %s MiB%s" % (node["id"], node["cpus"] or "none",
                                       node["memory_mib"] if node["memory_mib"] is not None else "unknown",
                                       "" if node["used_for_binding"] else " (not used for binding)")
            for node in facts["numa_nodes"]),
        "build class: %s" % tuning.build_class(facts),
        "MAX_JOBS: %s" % _max_jobs(facts),
    ]
    lines += ["warning: %s" % warning for warning in facts["warnings"]]
    for title, outcome in results:
        lines += ["", "## %s" % title]
        if isinstance(outcome, str):
            lines.append(outcome)
            continue
        for profile in outcome:
            lines.append("[%s] weights %.2f GiB (%s)"
                         % (profile["name"], profile["model_weights_gib"], profile["model_weights_source"]))
            lines += ["%s=%s" % item for item in sorted(profile["environment"].items())]
            lines.append("vllm serve %s" % " ".join(profile["arguments"]))
    return "\n".join(lines) + "\n"


def render_table():
    samples, dummy_host_facts, tuning = _imports()
    rows = ["| sample | CPU | platform | bf16 | build class | MAX_JOBS | TP | OMP bind | KV GiB 0.5B / 8B "
            "| 8B bf16 files: weights / KV GiB | dtype | fpmath |", "|" + "---|" * 12]
    for name in samples.sample_names():
        facts, results = compute(name)
        cpu = facts["cpu"]
        small, large, files = results[0][1], results[1][1], results[2][1]
        first = small[0] if not isinstance(small, str) else None
        kv = " / ".join(str(outcome[0]["kv_cache_gib"]) if not isinstance(outcome, str) else
                        ("unknown memory" if "reports no memory" in outcome else "does not fit")
                        for outcome in (small, large))
        weighed = ("%.2f / %s" % (files[0]["model_weights_gib"], files[0]["kv_cache_gib"]) if not isinstance(files, str)
                   else ("unknown memory" if "reports no memory" in files else "does not fit"))
        rows.append("| [%s](../tests/unit/samples/%s/SOURCE.md) | %s | %s | %s | `%s` | %s | %s | `%s` | %s | %s | %s "
                    "| %s |" % (
                        name, name, cpu["model_name"] or "?", cpu["platform"] or "-", "yes" if cpu["bf16"] else "no",
                        tuning.build_class(facts), _max_jobs(facts),
                        first["tensor_parallel_size"] if first else "-", first["omp_threads_bind"] if first else "-",
                        kv, weighed, first["dtype"] if first else tuning.dtype(facts),
                        (first["onednn_fpmath_mode"] if first else tuning.fpmath_mode(facts)) or "unset"))
    return "\n".join(rows) + "\n"


def expected_docs():
    text = DOCS.read_text()
    head, dummy, rest = text.partition(TABLE_BEGIN)
    dummy, dummy2, tail = rest.partition(TABLE_END)
    return head + TABLE_BEGIN + "\n" + render_table() + TABLE_END + tail


def write():
    samples, dummy_host_facts, dummy_tuning = _imports()
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for name in samples.sample_names():
        (GOLDEN_DIR / ("%s.txt" % name)).write_text(render_sample(name))
    DOCS.write_text(expected_docs())


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: tuning_golden.py --write")
    write()
