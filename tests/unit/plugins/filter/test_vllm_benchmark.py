"""The vllm_benchmark_svg filter: a plot for sweeps, nothing for single levels, clear errors."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.arm_inference.vllm.plugins.filter.vllm_benchmark import FilterModule

SVG = FilterModule().filters()["vllm_benchmark_svg"]


def _levels(*pairs):
    return [{"concurrency": c, "output_tokens_per_second": t, "latency_p50_ms": 100.0, "ttft_p50_ms": 10.0} for c, t in pairs]


def test_a_sweep_becomes_an_svg_document():
    svg = SVG({"host-a": [{"name": "main", "levels": _levels((1, 50.0), (2, 90.0))}]})
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")


def test_a_single_level_gives_an_empty_string():
    assert SVG({"host-a": [{"name": "main", "levels": _levels((8, 400.0))}]}) == ""


@pytest.mark.parametrize("value,message", [
    ([1, 2], "expects a mapping of host to vllm_chat_load results, got list"),
    ({"h": [{"name": "main", "levels": [{"ok": 1}, {"ok": 2}]}]}, "malformed vllm_chat_load results"),
])
def test_malformed_input_is_named(value, message):
    with pytest.raises(AnsibleFilterError, match=message):
        SVG(value)
