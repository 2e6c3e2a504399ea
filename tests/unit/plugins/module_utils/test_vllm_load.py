"""The figures of a chat load: nearest-rank percentiles, per-request TTFT/TPOT and per-level summaries."""

from __future__ import annotations

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_load import (
    levels_to_run,
    percentile,
    request_record,
    summarize,
)


@pytest.mark.parametrize("rank,expected", [(50, 5), (90, 9), (99, 10), (100, 10), (1, 1)])
def test_percentile_is_a_measured_value_by_nearest_rank(rank, expected):
    assert percentile([7, 3, 10, 1, 5, 2, 9, 4, 8, 6], rank) == expected


def test_percentile_of_nothing_is_none_and_ignores_missing_values():
    assert percentile([], 50) is None
    assert percentile([None, None], 90) is None
    assert percentile([None, 4.0], 50) == 4.0


@pytest.mark.parametrize("rank", [0, -1, 101])
def test_percentile_rank_out_of_range_is_refused(rank):
    with pytest.raises(ValueError, match="percentile rank"):
        percentile([1, 2], rank)


def test_request_record_splits_time_to_first_token_and_time_per_further_token():
    record = request_record(started=10.0, first_token=10.25, finished=12.25, output_tokens=5)
    assert record == {"ok": True, "error": None, "output_tokens": 5, "latency": 2.25, "ttft": 0.25, "tpot": 0.5}


def test_a_one_token_answer_has_no_time_per_output_token():
    record = request_record(started=0.0, first_token=0.5, finished=0.5, output_tokens=1)
    assert record["ttft"] == 0.5 and record["tpot"] is None


def test_a_stream_without_content_has_latency_but_no_token_times():
    record = request_record(started=0.0, first_token=None, finished=1.5, output_tokens=0)
    assert record["latency"] == 1.5 and record["ttft"] is None and record["tpot"] is None


def test_a_failed_request_keeps_its_error_and_no_times():
    record = request_record(started=0.0, first_token=None, finished=None, output_tokens=0, error="APIConnectionError")
    assert record == {"ok": False, "error": "APIConnectionError", "output_tokens": 0,
                      "latency": None, "ttft": None, "tpot": None}


def test_summary_counts_only_successful_requests_in_tokens_and_percentiles():
    records = [request_record(0.0, 0.1 * index, 1.0 + index, 11) for index in range(1, 5)]
    records.append(request_record(0.0, None, None, 0, error="RateLimitError 429: busy"))
    records.append(request_record(0.0, None, None, 0, error="RateLimitError 429: busy"))
    summary = summarize(4, records, wall_seconds=4.4)
    assert summary["requests"] == 6 and summary["ok"] == 4 and summary["failed"] == 2
    assert summary["errors"] == ["RateLimitError 429: busy"]
    assert summary["output_tokens"] == 44 and summary["output_tokens_per_second"] == 10.0
    assert summary["ttft_p50_ms"] == 200.0 and summary["ttft_p99_ms"] == 400.0
    assert summary["latency_p50_ms"] == 3000.0 and summary["latency_p90_ms"] == 5000.0
    # TPOT of request 1: (2.0 - 0.1) / 10 = 190 ms.
    assert summary["tpot_p50_ms"] == pytest.approx(280.0) and min(
        summary["tpot_p%d_ms" % rank] for rank in (50, 90, 99)) >= 190.0


def test_summary_of_a_level_where_everything_failed_has_no_figures():
    summary = summarize(2, [request_record(0.0, None, None, 0, error="APITimeoutError")] * 2, wall_seconds=600.0)
    assert summary["ok"] == 0 and summary["output_tokens_per_second"] == 0.0
    assert all(summary["%s_p%d_ms" % (name, rank)] is None for name in ("ttft", "tpot", "latency") for rank in (50, 90, 99))


def test_levels_send_one_request_per_slot_unless_a_count_is_given():
    assert levels_to_run([1, 8], 0) == [(1, 1), (8, 8)]
    assert levels_to_run([1, 8], 32) == [(1, 32), (8, 32)]


@pytest.mark.parametrize("level", [0, -2, True, "8", 2.5])
def test_levels_must_be_positive_integers(level):
    with pytest.raises(ValueError, match="concurrency levels must be integers >= 1"):
        levels_to_run([level], 0)


def _level(concurrency, tokens_per_second, latency, ttft):
    return {"concurrency": concurrency, "output_tokens_per_second": tokens_per_second,
            "latency_p50_ms": latency, "ttft_p50_ms": ttft}


def test_sweep_svg_draws_one_line_per_instance_and_metric():
    from xml.etree import ElementTree

    from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_load import sweep_svg

    hosts = {
        "graviton3-a": [{"name": "main", "levels": [_level(4, 310.0, 900.0, 120.0), _level(1, 95.5, 400.0, 60.0),
                                                    _level(16, 620.0, 2500.0, None)]}],
        "altra-a": [{"name": "node0", "levels": [_level(1, 80.0, 450.0, 70.0), _level(4, 250.0, 1000.0, 130.0)]},
                    {"name": "node1", "levels": [_level(8, 400.0, 1500.0, 200.0)]}],
    }
    svg = ElementTree.fromstring(sweep_svg(hosts))
    lines = svg.findall("{http://www.w3.org/2000/svg}polyline")
    drawn = sorted((line.get("data-series"), line.get("data-metric"), len(line.get("points").split())) for line in lines)
    # node1 has one level only (no line); graviton3's TTFT is missing at 16, so that line has 2 points.
    assert drawn == [
        ("altra-a node0", "latency_p50_ms", 2), ("altra-a node0", "output_tokens_per_second", 2),
        ("altra-a node0", "ttft_p50_ms", 2),
        ("graviton3-a main", "latency_p50_ms", 3), ("graviton3-a main", "output_tokens_per_second", 3),
        ("graviton3-a main", "ttft_p50_ms", 2),
    ]
    texts = [text.text for text in svg.iter("{http://www.w3.org/2000/svg}text")]
    # The x axis lists the union of levels; the throughput axis ends on a round number above 620.
    assert {"1", "4", "16"} <= set(texts) and "1000" in texts and "graviton3-a main" in texts


def test_sweep_svg_points_rise_with_the_value():
    from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_load import sweep_svg

    svg = sweep_svg({"h": [{"name": "main", "levels": [_level(1, 100.0, 100.0, 10.0), _level(2, 200.0, 150.0, 20.0)]}]})
    throughput = [line for line in svg.splitlines() if 'data-metric="output_tokens_per_second"' in line][0]
    (x1, y1), (x2, y2) = [tuple(float(value) for value in point.split(",")) for point in throughput.split('points="')[1].rstrip('"/>').split()]
    assert x2 > x1 and y2 < y1  # further right, and higher up (SVG's y grows downwards)


def test_sweep_svg_is_none_without_a_sweep_and_escapes_names():
    from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_load import sweep_svg

    assert sweep_svg({"h": [{"name": "main", "levels": [_level(8, 1.0, 1.0, 1.0)]}]}) is None
    assert sweep_svg({}) is None
    svg = sweep_svg({"a<b>&c": [{"name": "x", "levels": [_level(1, 1.0, 1.0, 1.0), _level(2, 2.0, 2.0, 2.0)]}]})
    assert "a&lt;b&gt;&amp;c x" in svg and "a<b>" not in svg
