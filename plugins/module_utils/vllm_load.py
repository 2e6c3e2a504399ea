# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Figures of a concurrent chat load against a vLLM server: what each request measured and the
per-level summary (requests OK, output tokens per second, TTFT/TPOT/latency percentiles)."""

from __future__ import annotations

import json
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


def concurrency_levels(value):
    """The concurrency levels as integers, accepting what an argument spec of `elements: int` accepts.

    Integer strings count: ansible-core before 2.19 renders `["{{ n | int }}"]` as `["2"]`, and the
    role's spec would convert that too. Anything else (booleans, fractions, levels below 1, an empty
    or non-list value) raises ValueError with the setting's name, what it got and what to do.
    """
    levels = []
    if isinstance(value, (list, tuple)) and value:
        for level in value:
            if isinstance(level, str) and level.strip().isascii() and level.strip().isdigit():
                level = int(level.strip())
            if isinstance(level, bool) or not isinstance(level, int) or level < 1:
                break
            levels.append(level)
        else:
            return levels
    raise ValueError(
        "vllm_benchmark_concurrency: must be a non-empty list of integers >= 1 (got %s); list the requests in flight "
        "per level, for example [1, 2, 4]" % (_as_json_like(value),))


def _as_json_like(value):
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def levels_to_run(concurrency, requests):
    """(concurrency, number of requests) per level; `requests` 0 means one request per slot."""
    levels = []
    for level in concurrency:
        if isinstance(level, bool) or not isinstance(level, int) or level < 1:
            raise ValueError("concurrency levels must be integers >= 1, got %r" % (level,))
        levels.append((level, requests if requests > 0 else level))
    return levels


# Series colours of the sweep plot (colour-blind safe, from the Okabe-Ito palette).
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
PANELS = (
    ("output_tokens_per_second", "output tokens/s", "Throughput"),
    ("latency_p50_ms", "ms", "Latency p50 (solid) and TTFT p50 (dashed)"),
)
WIDTH, HEIGHT, MARGIN = 460, 300, 56


def _escape(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _nice_ceiling(value):
    """The smallest 1/2/5 x 10^n at or above `value`, so the axis ends on a round number."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * 10 ** exponent >= value:
            return float(step * 10 ** exponent)
    return float(10 ** (exponent + 1))


def _y_scale(top):
    """value -> y coordinate of a panel whose axis ends at top."""
    return lambda value: HEIGHT - MARGIN - (value / top) * (HEIGHT - 2 * MARGIN)


def _axes(left, top, title, unit):
    """A panel's title, its two axes and five labelled horizontal grid lines from 0 to top."""
    y_of = _y_scale(top)
    parts = ['<text x="%d" y="20" font-size="13" font-weight="bold">%s</text>' % (left + MARGIN, _escape(title)),
             '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
             % (left + MARGIN, HEIGHT - MARGIN, left + WIDTH - 16, HEIGHT - MARGIN),
             '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
             % (left + MARGIN, MARGIN, left + MARGIN, HEIGHT - MARGIN)]
    for tick in range(5):
        value = top * tick / 4
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                     % (left + MARGIN - 4, y_of(value) + 4, ("%g" % value)))
        parts.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>'
                     % (left + MARGIN, y_of(value), left + WIDTH - 16, y_of(value)))
    parts.append('<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>'
                 % (left + 14, HEIGHT // 2, left + 14, HEIGHT // 2, _escape(unit)))
    return parts


def sweep_series(hosts):
    """(label, levels) per host and instance that has more than one concurrency level."""
    series = []
    for host in sorted(hosts):
        for endpoint in hosts[host] or []:
            levels = sorted(endpoint.get("levels") or [], key=lambda level: level["concurrency"])
            if len(levels) > 1:
                series.append(("%s %s" % (host, endpoint.get("name", "")), levels))
    return series


def sweep_svg(hosts):
    """An SVG of throughput and latency against concurrency, one line per host and instance, or None
    when no instance was measured at more than one level. `hosts` maps host -> vllm_chat_load results."""
    series = sweep_series(hosts)
    if not series:
        return None
    concurrency = sorted({level["concurrency"] for dummy, levels in series for level in levels})
    # Levels are spaced evenly (sweeps double the concurrency), labelled with their value.
    x_of = dict((level, MARGIN + index * (WIDTH - MARGIN - 16) / max(1, len(concurrency) - 1))
                for index, level in enumerate(concurrency))
    legend_height = 18 * len(series) + 10
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'
             % (2 * WIDTH, HEIGHT + legend_height), '<rect width="100%" height="100%" fill="white"/>']
    for panel, (key, unit, title) in enumerate(PANELS):
        left = panel * WIDTH
        keys = (key, "ttft_p50_ms") if key == "latency_p50_ms" else (key,)
        values = [level[name] for dummy, levels in series for level in levels for name in keys if level.get(name) is not None]
        top = _nice_ceiling(max(values) if values else 0)
        y_of = _y_scale(top)
        parts.extend(_axes(left, top, title, unit))
        for level in concurrency:
            parts.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (left + x_of[level], HEIGHT - MARGIN + 16, level))
        parts.append('<text x="%d" y="%d" text-anchor="middle">requests in flight</text>'
                     % (left + (WIDTH + MARGIN) // 2, HEIGHT - MARGIN + 34))
        for index, (label, levels) in enumerate(series):
            colour = COLOURS[index % len(COLOURS)]
            for name, dash in zip(keys, ("", ' stroke-dasharray="5,3"')):
                points = ["%.1f,%.1f" % (left + x_of[level["concurrency"]], y_of(level[name]))
                          for level in levels if level.get(name) is not None]
                if points:
                    parts.append('<polyline data-series="%s" data-metric="%s" fill="none" stroke="%s" stroke-width="2"%s points="%s"/>'
                                 % (_escape(label), name, colour, dash, " ".join(points)))
    for index, (label, dummy) in enumerate(series):
        y = HEIGHT + 14 + 18 * index
        parts.append('<rect x="%d" y="%d" width="14" height="4" fill="%s"/>' % (MARGIN, y - 4, COLOURS[index % len(COLOURS)]))
        parts.append('<text x="%d" y="%d">%s</text>' % (MARGIN + 20, y, _escape(label)))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def scatter_svg(points, title, x_unit, y_unit):
    """An SVG of one panel: a dot per point at (x, y) on axes from 0, labelled; a point with "marked"
    gets a ring and its label in bold. points: [{"label", "x", "y", "marked"}]; None without points."""
    points = [point for point in points if point.get("x") is not None and point.get("y") is not None]
    if not points:
        return None
    right = _nice_ceiling(max(point["x"] for point in points))
    top = _nice_ceiling(max(point["y"] for point in points))
    y_of = _y_scale(top)

    def x_of(value):
        return MARGIN + (value / right) * (WIDTH - MARGIN - 16)

    legend_height = 18 * len(points) + 10
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'
             % (WIDTH + 160, HEIGHT + legend_height), '<rect width="100%" height="100%" fill="white"/>']
    parts.extend(_axes(0, top, title, y_unit))
    for tick in range(5):
        value = right * tick / 4
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (x_of(value), HEIGHT - MARGIN + 16, value))
    parts.append('<text x="%d" y="%d" text-anchor="middle">%s</text>'
                 % ((WIDTH + MARGIN) // 2, HEIGHT - MARGIN + 34, _escape(x_unit)))
    for index, point in enumerate(points):
        colour = COLOURS[index % len(COLOURS)]
        x, y = x_of(point["x"]), y_of(point["y"])
        parts.append('<circle data-label="%s" cx="%.1f" cy="%.1f" r="4" fill="%s"/>' % (_escape(point["label"]), x, y, colour))
        if point.get("marked"):
            parts.append('<circle data-marked="%s" cx="%.1f" cy="%.1f" r="9" fill="none" stroke="black" stroke-width="2"/>'
                         % (_escape(point["label"]), x, y))
        line = HEIGHT + 14 + 18 * index
        parts.append('<circle cx="%d" cy="%d" r="4" fill="%s"/>' % (MARGIN + 7, line - 4, colour))
        weight = ' font-weight="bold"' if point.get("marked") else ""
        parts.append('<text x="%d" y="%d"%s>%s</text>' % (MARGIN + 20, line, weight, _escape(point["label"])))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
