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


LEVELS = FilterModule().filters()["vllm_benchmark_levels"]


@pytest.mark.parametrize("value,expected", [([8], [8]), ([1, 2, 4], [1, 2, 4]), (["2"], [2]), ((16,), [16])])
def test_levels_are_integers_in_order(value, expected):
    assert LEVELS(value) == expected


@pytest.mark.parametrize("value,got", [
    ([4, 0], "[4, 0]"), ([], "[]"), ([True], "[true]"), ([2.5], "[2.5]"), (["two"], '["two"]'), (["-1"], '["-1"]'),
    (["\u00b2"], '["\\u00b2"]'), (8, "8"), (None, "null"),
])
def test_bad_levels_fail_naming_the_variable_and_the_value(value, got):
    with pytest.raises(AnsibleFilterError) as error:
        LEVELS(value)
    message = str(error.value)
    assert message.startswith("vllm_benchmark: vllm_benchmark_concurrency: must be a non-empty list of integers >= 1")
    assert "(got %s)" % got in message
