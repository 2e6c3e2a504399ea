"""The benchmarks' readers of ansible-playbook output (PLAY RECAP, profile_tasks), and that p1_rerun.py
and p2_fanout.py import at all: they share helpers with the integration tests, and a helper moved
there once left both benchmarks failing at import without any test noticing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def load(name):
    """Import a benchmark script by path; it imports the integration tests' conftest by that name, so
    whatever conftest this pytest session registered is put aside meanwhile."""
    saved = sys.modules.pop("conftest", None)
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / ("%s.py" % name))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        if saved is not None:
            sys.modules["conftest"] = saved


bench = load("provisioning_bench")

# The end of a real site.yml re-run with profile_tasks (two hosts, trimmed).
OUTPUT = """\
TASK [arm_inference.vllm.vllm_serve : Poll /health] ****************************
ok: [arm-inference-it-1a2b3c4d]

PLAY RECAP *********************************************************************
arm-inference-it-1a2b3c4d  : ok=97   changed=0    unreachable=0    failed=0    skipped=41   rescued=0    ignored=0
arm-inference-it-5e6f7a8b  : ok=95   changed=1    unreachable=0    failed=0    skipped=43   rescued=0    ignored=0

Sunday 22 November 2026  23:10:01 +0000 (0:00:01.021)       0:04:58.114 *****
===============================================================================
arm_inference.vllm.package_candidates : Ask the package database ------- 21.43s
arm_inference.vllm.vllm_build : Read the build toolchain ---------------- 9.80s
Gathering Facts --------------------------------------------------------- 35.02s
"""


def test_the_recap_gives_each_hosts_counters():
    recap = bench.parse_recap(OUTPUT)
    assert recap == {
        "arm-inference-it-1a2b3c4d": {"ok": 97, "changed": 0, "unreachable": 0, "failed": 0, "skipped": 41, "rescued": 0, "ignored": 0},
        "arm-inference-it-5e6f7a8b": {"ok": 95, "changed": 1, "unreachable": 0, "failed": 0, "skipped": 43, "rescued": 0, "ignored": 0},
    }
    run = bench.PlaybookRun("re-run", 298.1, recap)
    assert run.total("changed") == 1 and run.total("ok") == 192


def test_the_slowest_tasks_come_first():
    assert bench.parse_slowest_tasks(OUTPUT) == [
        ("Gathering Facts", 35.02),
        ("arm_inference.vllm.package_candidates : Ask the package database", 21.43),
        ("arm_inference.vllm.vllm_build : Read the build toolchain", 9.8),
    ]


def test_output_without_a_recap_is_a_benchmark_failure():
    with pytest.raises(bench.BenchmarkFailure, match="no PLAY RECAP"):
        bench.parse_recap("ERROR! the playbook could not be found\n")


def test_ratio_of_a_zero_time_is_infinite():
    assert bench.ratio(1.0, 4.0) == 0.25 and bench.ratio(1.0, 0) == float("inf")


@pytest.mark.parametrize("name", ["p1_rerun", "p2_fanout"])
def test_the_benchmark_scripts_import(name):
    assert callable(load(name).benchmark)
