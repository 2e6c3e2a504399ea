# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Figures of a concurrent chat load against a vLLM server: what each request measured and the
per-level summary (requests OK, output tokens per second, TTFT/TPOT/latency percentiles)."""

from __future__ import annotations

import math

PERCENTILES = (50, 90, 99)


def percentile(values, rank):
    """The nearest-rank percentile (no interpolation: every figure reported was really measured)."""
    ordered = sorted(value for value in values if value is not None)
    if not ordered:
        return None
    if not 0 < rank <= 100:
        raise ValueError("percentile rank must be in (0, 100], got %r" % (rank,))
    return ordered[max(0, math.ceil(rank / 100.0 * len(ordered)) - 1)]


def request_record(started, first_token, finished, output_tokens, error=None):
    """One request's measurements, from monotonic timestamps in seconds.

    TTFT is the time to the first streamed content; TPOT the mean time between the following output
    tokens, so a one-token answer has none."""
    record = {"ok": error is None, "error": error, "output_tokens": output_tokens or 0,
              "latency": None, "ttft": None, "tpot": None}
    if error is None:
        record["latency"] = finished - started
        if first_token is not None:
            record["ttft"] = first_token - started
            if output_tokens and output_tokens > 1:
                record["tpot"] = (finished - first_token) / (output_tokens - 1)
    return record


def _rounded(value, digits):
    return None if value is None else round(value, digits)


def summarize(concurrency, records, wall_seconds):
    """The figures of one concurrency level: counts, throughput and percentiles in milliseconds."""
    done = [record for record in records if record["ok"]]
    tokens = sum(record["output_tokens"] for record in done)
    summary = {
        "concurrency": concurrency,
        "requests": len(records),
        "ok": len(done),
        "failed": len(records) - len(done),
        "errors": sorted({record["error"] for record in records if not record["ok"]})[:5],
        "output_tokens": tokens,
        "seconds": round(wall_seconds, 3),
        "output_tokens_per_second": round(tokens / wall_seconds, 1) if wall_seconds > 0 else None,
    }
    for name in ("ttft", "tpot", "latency"):
        values = [record[name] * 1000.0 for record in done if record[name] is not None]
        for rank in PERCENTILES:
            summary["%s_p%d_ms" % (name, rank)] = _rounded(percentile(values, rank), 1)
    return summary


def levels_to_run(concurrency, requests):
    """(concurrency, number of requests) per level; `requests` 0 means one request per slot."""
    levels = []
    for level in concurrency:
        if isinstance(level, bool) or not isinstance(level, int) or level < 1:
            raise ValueError("concurrency levels must be integers >= 1, got %r" % (level,))
        levels.append((level, requests if requests > 0 else level))
    return levels
