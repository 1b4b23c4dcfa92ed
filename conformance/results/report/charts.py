"""The Speed section: one inline SVG chart per benchmark instance x device x dtype, each backend's
median time relative to the ``--speed-baseline`` backend's on a log scale."""

from __future__ import annotations

import html
import math
from typing import Any

from conformance.results.report.common import DEVICE_ORDER, LABEL_LIMIT, backend_order, capped, fmt_seconds, order
from conformance.results.store import Results


def speed_charts(runs: list[Results], labels: list[str], baseline_backend: str) -> list[dict[str, Any]]:
    """One chart per benchmark instance x device x dtype: bars of median time relative to the baseline."""
    charts, backends = [], backend_order(runs)
    for (spec, case, device, dtype), group in _benchmark_groups(runs, baseline_backend).items():
        bars = []
        info = next((b[4] for b in group["bars"] if b[4]), None) or {}
        for index, backend, median, outcome, _ in sorted(group["bars"], key=lambda b: (order(b[1], backends), b[0])):
            base = group["baselines"].get(index)
            ratio = median / base if median and base else None
            ratio = ratio if ratio and math.isfinite(ratio) else None  # 1e300 / 1e-300 is no bar
            bars.append({"run": labels[index], "backend": backend, "median": median, "ratio": ratio,
                         "outcome": outcome, "label": fmt_seconds(median)})
        charts.append({"spec": spec, "case": case, "device": device, "dtype": dtype, "info": benchmark_text(info),
                       "svg": bar_chart_svg(bars, baseline_backend)})
    return sorted(charts, key=lambda c: (c["spec"], c["case"], order(c["device"], DEVICE_ORDER), c["dtype"] or ""))


def _benchmark_groups(runs: list[Results], baseline_backend: str) -> dict[tuple, dict]:
    """The benchmark records by (spec, case, device, dtype): their bars, and each run's baseline median."""
    groups: dict[tuple, dict] = {}
    for index, results in enumerate(runs):
        for record in results.records:
            if record.get("kind") != "benchmark":
                continue
            record = capped(record, LABEL_LIMIT)  # names drawn in an SVG: short
            timing = record.get("timing") or {}
            median = timing.get("median")  # report_problem: None or a number >= 0
            key = (record["spec"], record["case"], record.get("device"), record.get("dtype"))
            group = groups.setdefault(key, {"bars": [], "baselines": {}})
            if record.get("backend") == baseline_backend and median:
                group["baselines"][index] = median
            group["bars"].append((index, record.get("backend"), median, record["outcome"], record.get("benchmark")))
    return groups


def benchmark_text(info: Any) -> str:
    """'size 100×8, density 0.1, 10 step(s), nnz 80' from what the record has of it."""
    if not isinstance(info, dict):
        return ""
    parts = []
    if isinstance(info.get("size"), list):
        parts.append("size " + "×".join(map(str, info["size"])))
    for name, template in (("density", "density {}"), ("steps", "{} step(s)"), ("nnz", "nnz {}")):
        if info.get(name) is not None:
            parts.append(template.format(info[name]))
    return ", ".join(parts)


ROW_H, LABEL_W, CHART_W, TEXT_W = 22, 250, 360, 170


def bar_chart_svg(bars: list[dict], baseline_backend: str) -> str:
    """Horizontal bars on a log scale around 1x (the baseline backend's median)."""
    width = LABEL_W + CHART_W + TEXT_W
    height = ROW_H * len(bars) + 30
    ratios = [b["ratio"] for b in bars if b["ratio"]]
    span = max([1.0] + [abs(math.log10(r)) for r in ratios])
    span = math.ceil(span * 2) / 2  # decades, to the half
    center = LABEL_W + CHART_W / 2

    def x_of(ratio: float) -> float:
        return center + (math.log10(ratio) / span) * (CHART_W / 2 - 4)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="speed" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img">']
    for decade in range(-int(math.floor(span)), int(math.floor(span)) + 1):
        x = x_of(10.0 ** decade)
        parts.append(f'<line x1="{x:.1f}" y1="4" x2="{x:.1f}" y2="{height - 22}" class="grid{" one" if decade == 0 else ""}"/>')
        parts.append(f'<text x="{x:.1f}" y="{height - 8}" class="axis" text-anchor="middle">{10.0 ** decade:g}×</text>')
    for i, bar in enumerate(bars):
        parts.extend(_bar(bar, 6 + i * ROW_H, center, x_of, baseline_backend))
    parts.append("</svg>")
    return "".join(parts)


def _bar(bar: dict, y: float, center: float, x_of, baseline_backend: str) -> list[str]:
    """One bar's name, rectangle (when it has a ratio) and value text."""
    name = html.escape(f"{bar['backend']} · {bar['run']}")
    parts = [f'<text x="{LABEL_W - 6}" y="{y + 13}" class="name" text-anchor="end">{name}</text>']
    if bar["ratio"]:
        x = x_of(bar["ratio"])
        left, w = min(center, x), max(abs(x - center), 1.5)
        kind = "slower" if bar["ratio"] > 1 else "faster"
        parts.append(f'<rect x="{left:.1f}" y="{y + 2}" width="{w:.1f}" height="{ROW_H - 8}" '
                     f'class="bar {kind} o-{bar["outcome"]}"><title>{name}: {bar["ratio"]:.3g}× '
                     f'{html.escape(baseline_backend)} ({html.escape(bar["label"])})</title></rect>')
        text = f'{bar["ratio"]:.3g}× · {bar["label"]}'
    elif bar["median"]:
        text = f'{bar["label"]} (no {baseline_backend} time)'
    else:
        text = bar["outcome"]
    parts.append(f'<text x="{LABEL_W + CHART_W + 6}" y="{y + 13}" class="value">{html.escape(text)}</text>')
    return parts
