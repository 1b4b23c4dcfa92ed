"""The HTML compatibility report: any number of results files -> one self-contained HTML file.

``conformance report RESULTS... -o reports/index.html`` renders ``template.html.j2`` with the
report's CSS and JavaScript inlined and the item details embedded as JSON: it opens offline, from
a file or an artifact store, with no CDN. Sections: the runs (torch, devices, machine, commit), the
matrix of spec/case x backend x device x run (a chip per dtype, coloured by outcome; a click shows
the item's message, expected vs got, errors, timings and the command line that re-runs it), speed
charts (inline SVG: each backend's median time relative to ``--speed-baseline``, default the
NumPy reference), and the diff between any two runs. A results file that cannot be read, or that
holds what the report cannot show (a bare NaN, a negative median, ...), is named at the top of the
report and left out; the others still make the report. Only http(s) addresses become links.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from conformance.core import outcomes
from conformance.core.record import COMPILES, ItemRecord
from conformance.core.target import CandidateTarget
from conformance.results.store import (Results, ResultsError, check_output, item_key, load_results, now,
                                       write_output)
from conformance.core.types import Outcome

# the candidate first (the column a reader of a gate looks for), then stock torch's backends
BACKEND_ORDER = ("candidate", "coo", "masked", "dense", "reference", "kernel", "kernel-triton")
DEVICE_ORDER = ("cpu", "cuda", "xla")
DTYPE_SHORT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}
MAX_DIFF_RUNS = 6  # every ordered pair of runs up to this many runs; consecutive pairs beyond
TEXT_LIMIT = 10_000  # characters of one message, value or name shown (the results file keeps it all)
LABEL_LIMIT = 300  # characters of a run's label, repeated on every chip of its run
ITEMS_LIMIT = 10_000  # elements of one list shown (a tensor's values)


def capped(value: Any, limit: int = TEXT_LIMIT) -> Any:
    """``value`` with every string cut to ``limit`` characters and every list to ITEMS_LIMIT
    elements, each cut saying how much more the results file has: what a results file holds never
    makes the page grow beyond a bound per item (a 50 MB label, a million-element value)."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return value[:limit] + f"… ({len(value) - limit:,} more characters in the results file)"
    if isinstance(value, dict):
        return {capped(k, limit): capped(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        shown = [capped(v, limit) for v in value[:ITEMS_LIMIT]]
        if len(value) > ITEMS_LIMIT:
            shown.append(f"… ({len(value) - ITEMS_LIMIT:,} more items in the results file)")
        return shown
    return value


def _order(value: str | None, known: tuple[str, ...]) -> tuple:
    return (known.index(value), "") if value in known else (len(known), value or "")


@dataclass
class ReportBuild:
    path: Path
    runs: list[Results]
    problems: list[ResultsError]


def _default_label(results: Results) -> str:
    """'torch X', and the candidate's module:attr when the run had one (what tells candidate runs apart)."""
    impls = (results.run.get("options") or {}).get("conformance_impl") or []
    names = [target.short_name if (target := CandidateTarget.parse_or_none(impl)) else str(impl) for impl in impls]
    return results.label + (f" + {', '.join(names)}" if names else "")


def run_labels(runs: list[Results]) -> list[str]:
    """Each run's column label: its --conformance-label, else 'torch X'; made unique by whichever of
    host, file name or position tells the runs that share a label apart."""
    labels = [r.label if r.run.get("label") else _default_label(r) for r in runs]
    extras = (lambda i: runs[i].run.get("hostname"), lambda i: runs[i].path.stem, lambda i: f"#{i + 1}")
    for extra in extras:
        for label in set(labels):
            same = [i for i, other in enumerate(labels) if other == label]
            if len(same) > 1 and len({extra(i) for i in same}) == len(same):
                for i in same:
                    labels[i] = f"{label} ({extra(i)})"
    for label in set(labels):  # still the same: number them
        same = [i for i, other in enumerate(labels) if other == label]
        if len(same) > 1:
            for i in same:
                labels[i] = f"{label} (#{i + 1})"
    return labels


def run_tag(index: int) -> str:
    """A short tag for a run inside a matrix cell: A, B, ... (the full label is on hover and in the key)."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return letters[index] if index < len(letters) else f"R{index + 1}"


def repro_command(record: ItemRecord, run: dict) -> str:
    """The command line that re-runs one item with the options of its run, from any directory
    (``python -m conformance replay``): rebuilt from the record's structured fields (node id, op,
    seed, profile) and its run's options, each argument shell-quoted; never the record's free-text
    ``rerun`` field, which a results file could make any command line at all."""
    from conformance.results.rerun import command_from_record

    try:
        return command_from_record({key: value for key, value in record.items() if key != "rerun"}, run)
    except (TypeError, AttributeError, KeyError):  # a field of the wrong type (an int profile): no command
        return ""


def _expected_vs_got(message: str | None) -> list[dict[str, str]]:
    """Pairs of 'expected ...' / 'got ...' lines out of a Mismatch message."""
    if not message:
        return []
    pairs, expected = [], None
    for line in message.splitlines():
        text = line.strip()
        if text.startswith("expected "):
            expected = text[len("expected "):].strip()
        elif text.startswith("got ") and expected is not None:
            pairs.append({"expected": expected, "got": text[len("got "):].strip()})
            expected = None
    return pairs


def divergence_of(record: ItemRecord) -> dict | None:
    """An xfail item's known divergence {reason, link}: the record's ``divergence`` field, else
    parsed out of pytest's xfail reason ("known divergence: <reason> (<link>)"). A link that is not
    http(s) is no link: it comes back as ``unsafe_link``, shown as text."""
    divergence = record.get("divergence")
    if isinstance(divergence, dict) and divergence.get("reason"):
        link = divergence.get("link")
        if link is None or http_url(link):
            return {"reason": str(divergence["reason"]), "link": link}
        return {"reason": str(divergence["reason"]), "link": None, "unsafe_link": str(link)}  # shown as text
    message = record.get("message") or ""
    if record.get("outcome") not in (Outcome.XFAIL, Outcome.XPASS) or not message.startswith("known divergence: "):
        return None
    text = message[len("known divergence: "):].strip()
    match = re.match(r"(?s)(.*?)\s*\((https?://[^\s()]+)\)\s*$", text)
    if match:
        return {"reason": match.group(1), "link": match.group(2)}
    return {"reason": text, "link": None}


def _counts(records: Iterable[ItemRecord]) -> dict[str, int]:
    counts = {o: 0 for o in outcomes.ALL}
    for record in records:
        counts[record["outcome"]] = counts.get(record["outcome"], 0) + 1
    return counts


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


# ------------------------------------------------------------------ speed charts


def speed_charts(runs: list[Results], labels: list[str], baseline_backend: str) -> list[dict[str, Any]]:
    """One chart per benchmark instance x device x dtype: bars of median time relative to the baseline."""
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
    charts = []
    for (spec, case, device, dtype), group in groups.items():
        bars = []
        info = next((b[4] for b in group["bars"] if b[4]), None) or {}
        for index, backend, median, outcome, _ in sorted(
                group["bars"], key=lambda b: (_order(b[1], BACKEND_ORDER), b[0])):
            base = group["baselines"].get(index)
            ratio = median / base if median and base else None
            ratio = ratio if ratio and math.isfinite(ratio) else None  # 1e300 / 1e-300 is no bar
            bars.append({"run": labels[index], "backend": backend, "median": median, "ratio": ratio,
                         "outcome": outcome, "label": _fmt_seconds(median)})
        charts.append({"spec": spec, "case": case, "device": device, "dtype": dtype, "info": _benchmark_text(info),
                       "svg": _bar_chart_svg(bars, baseline_backend)})
    return sorted(charts, key=lambda c: (c["spec"], c["case"], _order(c["device"], DEVICE_ORDER), c["dtype"] or ""))


def _benchmark_text(info: Any) -> str:
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


def _bar_chart_svg(bars: list[dict], baseline_backend: str) -> str:
    """Horizontal bars on a log scale around 1x (the baseline backend's median)."""
    row_h, label_w, chart_w, text_w = 22, 250, 360, 170
    width = label_w + chart_w + text_w
    height = row_h * len(bars) + 30
    ratios = [b["ratio"] for b in bars if b["ratio"]]
    span = max([1.0] + [abs(math.log10(r)) for r in ratios])
    span = math.ceil(span * 2) / 2  # decades, to the half
    center = label_w + chart_w / 2

    def x_of(ratio: float) -> float:
        return center + (math.log10(ratio) / span) * (chart_w / 2 - 4)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="speed" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img">']
    for decade in range(-int(math.floor(span)), int(math.floor(span)) + 1):
        x = x_of(10.0 ** decade)
        parts.append(f'<line x1="{x:.1f}" y1="4" x2="{x:.1f}" y2="{height - 22}" class="grid{" one" if decade == 0 else ""}"/>')
        parts.append(f'<text x="{x:.1f}" y="{height - 8}" class="axis" text-anchor="middle">{10.0 ** decade:g}×</text>')
    for i, bar in enumerate(bars):
        y = 6 + i * row_h
        name = html.escape(f"{bar['backend']} · {bar['run']}")
        parts.append(f'<text x="{label_w - 6}" y="{y + 13}" class="name" text-anchor="end">{name}</text>')
        if bar["ratio"]:
            x = x_of(bar["ratio"])
            left, w = min(center, x), max(abs(x - center), 1.5)
            kind = "slower" if bar["ratio"] > 1 else "faster"
            parts.append(f'<rect x="{left:.1f}" y="{y + 2}" width="{w:.1f}" height="{row_h - 8}" '
                         f'class="bar {kind} o-{bar["outcome"]}"><title>{name}: {bar["ratio"]:.3g}× '
                         f'{html.escape(baseline_backend)} ({html.escape(bar["label"])})</title></rect>')
            text = f'{bar["ratio"]:.3g}× · {bar["label"]}'
        elif bar["median"]:
            text = f'{bar["label"]} (no {baseline_backend} time)'
        else:
            text = bar["outcome"]
        parts.append(f'<text x="{label_w + chart_w + 6}" y="{y + 13}" class="value">{html.escape(text)}</text>')
    parts.append("</svg>")
    return "".join(parts)


# ------------------------------------------------------------------ loading


def http_url(value: Any) -> str | None:
    """``value`` when it is an http(s) address (the only kind the report makes a link of), else None."""
    if isinstance(value, str) and re.match(r"(?i)https?://[^\s]+$", value.strip()):
        return value.strip()
    return None


def _non_finite(document: Any) -> str | None:
    """Where the first non-finite number is ("records/3/seconds"), or None; iterative, so any depth."""
    stack = [((), document)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return "/".join(map(str, where)) or "(top level)"
        if isinstance(value, dict):
            stack.extend(((*where, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*where, i), v) for i, v in enumerate(value))
    return None


def report_problem(results: Results) -> str | None:
    """What in a schema-valid file the report cannot show, or None."""
    where = _non_finite({"run": results.run, "records": results.records, "cases": results.cases})
    if where:
        return (f"a non-finite number at {where} (a bare NaN or Infinity, or one out of range such as 1e600): "
                "not strict JSON, not written by this suite")
    impls = (results.run.get("options") or {}).get("conformance_impl")
    if impls is not None and not (isinstance(impls, list) and all(isinstance(i, str) for i in impls)):
        return f"run/options/conformance_impl is {impls!r:.80}, not a list of 'op=module:attr' strings"
    for index, record in enumerate(results.records):
        timing = record.get("timing")
        median = timing.get("median") if isinstance(timing, dict) else None
        if median is not None and (isinstance(median, bool) or not isinstance(median, (int, float)) or median < 0):
            return f"records/{index}/timing/median is {median!r:.80}, not a time in seconds"
    return None


def load_for_report(paths: Iterable[str | Path]) -> tuple[list[Results], list[ResultsError]]:
    """Each file loaded and checked on its own: whatever one raises names that file and leaves it out."""
    runs, problems = [], []
    for path in paths:
        try:
            results = load_results(path)
            problem = report_problem(results)
            if problem:
                raise ResultsError(path, problem)
            _default_label(results)
        except ResultsError as exc:
            problems.append(exc)
        except RecursionError:
            problems.append(ResultsError(path, "nested too deeply to read (RecursionError): not a results file"))
        except Exception as exc:  # noqa: BLE001 - one odd file never costs the report of the others
            problems.append(ResultsError(path, f"cannot be shown ({type(exc).__name__}: {exc})"[:400]))
        else:
            runs.append(results)
    return runs, problems


# ------------------------------------------------------------------ building


def _entry(record: ItemRecord, results: Results, r_index: int) -> dict[str, Any]:
    """What the page knows of one item (embedded as JSON, shown in the item panel)."""
    key = item_key(record)
    kind = record.get("kind", "case")
    divergence = divergence_of(record)
    return {
        "run": r_index, "nodeid": record["nodeid"], "kind": record.get("kind"), "spec": record["spec"],
        "case": record.get("case"), "op": record.get("op"), "backend": record.get("backend"),
        "device": record.get("device"), "dtype": record.get("dtype"), "outcome": record["outcome"],
        "message": record.get("message"), "pairs": _expected_vs_got(record.get("message")),
        "max_abs_error": record.get("max_abs_error"), "max_rel_error": record.get("max_rel_error"),
        "seconds": record.get("seconds"), "timing": record.get("timing"),
        "compiles": record.get(COMPILES), "benchmark": record.get("benchmark"),
        "crashed": record.get("crashed", False), "repro": repro_command(record, results.run),
        "key": "|".join(str(k) for k in key),
        "case_key": f"{record['spec']}::{record.get('case')}" if kind == "case" else None,
        "verdict": record.get("verdict"), "divergence": divergence,
        "torch_max_abs_error": record.get("torch_max_abs_error"), "values": record.get("values"),
        "improvement": record.get("improvement"), "stale_divergence": record.get("stale_divergence"),
        "counterexample": record.get("counterexample"), "looks_like": record.get("looks_like"),
        "narrowed": record.get("narrowed"), "budget_reached": record.get("budget_reached"),
    }


def _case_context(context: dict) -> dict:
    """A case's context from the results' cases map, its source's address as ``href`` when http(s)."""
    source = context.get("source")
    if isinstance(source, dict):
        return {**context, "source": {**source, "href": http_url(source.get("url") or source.get("link"))}}
    return context


def _group_of(record: ItemRecord) -> str:
    """The matrix table a record's row is in: its spec file; generated items one table per op."""
    if record.get("spec") == "generated" and record.get("op"):
        return f"generated · {record['op']}"
    return record["spec"]


def _run_summary(results: Results, label: str, index: int) -> dict[str, Any]:
    """The Runs table's line for one run: every field optional (the schema requires few)."""
    run = results.run
    suite = run.get("suite") if isinstance(run.get("suite"), dict) else {}
    devices = run.get("devices") if isinstance(run.get("devices"), dict) else {}
    return {
        "label": label, "tag": run_tag(index), "path": str(results.path), "counts": _counts(results.records),
        "records": len(results.records), "torch": run.get("torch"), "torch_xla": run.get("torch_xla"),
        "python": run.get("python"), "numpy": run.get("numpy"), "hostname": run.get("hostname"),
        "cpu": " ×".join(str(v) for v in (run.get("cpu_model"), run.get("cpu_count")) if v is not None),
        "commit": str(suite.get("git_commit") or "")[:10], "dirty": suite.get("git_dirty"),
        "started": run.get("started"), "finished": run.get("finished"), "status": run.get("status"),
        "not_run": len(run.get("not_run") or []),
        "devices": ", ".join(f"{name}: {info.get('name') or 'unavailable (' + str(info.get('unavailable')) + ')'}"
                             if isinstance(info, dict) else str(name) for name, info in devices.items()),
    }


def _matrix(runs: list[Results], labels: list[str], items: list[dict], rows: dict) -> dict[str, Any]:
    """Groups (one table each) with only the columns that ran something in them; columns skipped
    everywhere are named instead of drawn."""
    column_items: dict[tuple[str, str], list[int]] = defaultdict(list)
    for row in rows.values():
        for column, indices in row["cells"].items():
            column_items[column].extend(indices)
    hidden_columns = []
    for column, indices in list(column_items.items()):
        if all(items[i]["outcome"] == "skipped" for i in indices):
            reasons = sorted({(items[i]["message"] or "").removeprefix("Skipped: ") for i in indices})
            hidden_columns.append({"backend": column[0], "device": column[1], "count": len(indices),
                                   "reason": "; ".join(r for r in reasons if r)[:300]})
    multi_run = len(runs) > 1
    runs_in_column = {c: {items[i]["run"] for i in v} for c, v in column_items.items()}
    grouped: dict[str, list[dict]] = defaultdict(list)
    for row in rows.values():
        grouped[row["group"]].append(row)
    groups = []
    for name, group_rows in grouped.items():
        ran = {c for row in group_rows for c, indices in row["cells"].items()
               if any(items[i]["outcome"] != "skipped" for i in indices)}
        columns = sorted(ran, key=lambda c: (_order(c[0], BACKEND_ORDER), _order(c[1], DEVICE_ORDER)))
        group_rows.sort(key=lambda r: (r["kind"] == "benchmark",))
        groups.append({"name": name, "columns": [{"backend": c[0], "device": c[1]} for c in columns],
                       "header_backends": _spans([c[0] for c in columns]),
                       "rows": [_matrix_row(row, columns, runs, labels, items, runs_in_column) for row in group_rows]})
    return {"groups": groups, "hidden_columns": hidden_columns, "multi_run": multi_run}


def _matrix_row(row: dict, columns: list[tuple], runs: list, labels: list[str], items: list[dict],
                runs_in_column: dict) -> dict[str, Any]:
    """One spec/case row: per column one line per run, a chip per dtype."""
    multi_run = len(runs) > 1
    cells = []
    for column in columns:
        lines = []
        for r_index in range(len(runs)):
            chips = sorted((i for i in row["cells"].get(column, []) if items[i]["run"] == r_index),
                           key=lambda i: _order(items[i]["dtype"], tuple(DTYPE_SHORT)))
            if not chips and (not multi_run or r_index not in runs_in_column[column]):
                continue  # a run that has nothing in this column (a baseline without the candidate)
            lines.append({"run": r_index, "tag": run_tag(r_index), "label": labels[r_index], "chips": [
                {"i": i, "outcome": items[i]["outcome"],
                 "text": DTYPE_SHORT.get(items[i]["dtype"], items[i]["dtype"] or "·"),
                 "title": f"{labels[r_index]} · {column[0]} · {column[1]} · {items[i]['dtype']}: "
                          f"{items[i]['outcome']}" + (f" ({items[i]['verdict']})" if items[i]["verdict"] else "")}
                for i in chips]})
        if not any(line["chips"] for line in lines):
            lines = []
        cells.append({"backend": column[0], "device": column[1], "lines": lines})
    outcomes_by_item = defaultdict(set)
    for column, indices in row["cells"].items():
        for i in indices:
            outcomes_by_item[(column, items[i]["dtype"])].add((items[i]["run"], items[i]["outcome"]))
    differs = multi_run and any(len({o for _, o in v}) > 1 or len(v) < len(runs) for v in outcomes_by_item.values())
    row_outcomes = {items[i]["outcome"] for indices in row["cells"].values() for i in indices}
    # xfails and xpasses are worth a look: only rows of passes, skips and unsupported ones count as clean
    all_pass = row_outcomes <= {Outcome.PASSED, Outcome.SKIPPED, Outcome.UNSUPPORTED}
    return {"case": row["case"], "kind": row["kind"], "cells": cells, "differs": differs, "all_pass": all_pass,
            "outcomes": " ".join(sorted(row_outcomes)), "search": f"{row['spec']} {row['case']} {row['op'] or ''}",
            "title": row["title"]}


def _diffs(runs: list[Results], item_index: dict) -> tuple[list[dict], str | None, tuple[int, int]]:
    """Every ordered pair of runs (consecutive ones beyond MAX_DIFF_RUNS), the one shown first, its pair."""
    from conformance.results.gate import diff_runs

    diffs = []
    if len(runs) >= 2:
        pairs = ([(a, b) for a in range(len(runs)) for b in range(len(runs)) if a != b]
                 if len(runs) <= MAX_DIFF_RUNS else [(a, a + 1) for a in range(len(runs) - 1)])
        for a, b in pairs:
            diff = diff_runs(runs[a], runs[b])

            def ref(change, run_index):
                record = change.head if run_index == b else change.base
                return {"label": capped(change.label), "i": item_index.get((run_index, change.key)),
                        "from": change.base_outcome, "to": change.head_outcome,
                        "message": capped((record or {}).get("message") or "")}

            def timing(t):
                return {"label": capped(t.label), "i": item_index.get((b, t.key)), "ratio": t.ratio, "p": t.p_value,
                        "base": _fmt_seconds(t.base_median), "head": _fmt_seconds(t.head_median)}

            diffs.append({
                "base": a, "head": b, "id": f"diff-{a}-{b}",
                "regressed": [ref(c, b) for c in diff.regressed], "improved": [ref(c, b) for c in diff.improved],
                "changed": [ref(c, b) for c in diff.changed], "added": [ref(c, b) for c in diff.added],
                "removed": [ref(c, a) for c in diff.removed],
                "slower": [timing(t) for t in diff.slower], "faster": [timing(t) for t in diff.faster],
                "compared": diff.compared,
            })
    if not diffs:
        return diffs, None, (0, max(len(runs) - 1, 0))

    def weight(d: dict) -> tuple:
        changes = sum(len(d[k]) for k in ("regressed", "improved", "changed", "slower", "faster"))
        # a pair that differs first; then the one comparing most items; then earlier -> later runs
        return (changes > 0, changes + len(d["added"]) + len(d["removed"]) > 0, d["compared"], d["base"] < d["head"])

    best = max(diffs, key=weight)
    return diffs, best["id"], (best["base"], best["head"])


def _environment():
    """Jinja with autoescape, StrictUndefined and a ``tojson`` that writes <, >, &, ' as \\u escapes
    (any string survives inside <script>), strict JSON (no NaN) and compact."""
    import jinja2

    package = resources.files("conformance.results.report")
    env = jinja2.Environment(loader=jinja2.FunctionLoader(lambda name: package.joinpath(name).read_text("utf-8")),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.policies["json.dumps_kwargs"] = {"sort_keys": False, "allow_nan": False, "separators": (",", ":")}
    env.filters["http_url"] = http_url
    return env, package


def output_path(out: str | Path) -> Path:
    """``-o``: a file to write, or a folder (one that exists, or a path ending in /) for its index.html."""
    folder = str(out).endswith(("/", os.sep))
    out = Path(out)
    return out / "index.html" if folder or out.is_dir() else out


DEFAULT_TITLE = "Sparse & masked semantics: compatibility report"


def _what_was_checked(runs: list[Results]) -> str:
    """'adagrad, coalesce on coo, candidate (cpu)': the ops, backends and devices the runs' records have."""
    def names(field: str) -> list[str]:
        found = {str(r.get(field)) for results in runs for r in results.records if r.get(field)}
        order = {"backend": BACKEND_ORDER, "device": DEVICE_ORDER}.get(field, ())
        return sorted(found, key=lambda v: _order(v, order))

    ops, backends, devices = names("op"), names("backend"), names("device")
    if not ops and not backends:
        return "no items"
    text = ", ".join(ops) or "(no op)"
    if backends:
        text += " on " + ", ".join(backends)
    return text + (f" ({', '.join(devices)})" if devices else "")


def report_title(runs: list[Results], labels: list[str]) -> str:
    """The page's heading and <title>: the run (its label), torch's version and what was checked;
    for several runs, the runs compared. Never one item's name."""
    if not runs:
        return f"{DEFAULT_TITLE} (no readable results file)"
    versions = list(dict.fromkeys(f"torch {r.run.get('torch')}" for r in runs))
    what = capped(_what_was_checked(runs), LABEL_LIMIT)
    if len(runs) == 1:
        label = labels[0]
        torch = "" if versions[0] in label else f" · {versions[0]}"
        return f"{label}{torch}: {what}"
    shown = " vs ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
    return f"{len(runs)} runs: {shown} · {', '.join(versions[:4])}: {what}"


def build_report(paths: Iterable[str | Path], out: str | Path, *, title: str | None = None,
                 speed_baseline: str = "reference", verdict: list[str] | None = None) -> ReportBuild:
    """Render the report of ``paths`` into ``out`` (a file, or a folder for its index.html);
    unreadable files are listed, not fatal. OSError when ``out`` cannot be written
    (:class:`~conformance.results.store.UnsafeOutput`, before anything is read, when it is a device, a
    folder or a file that is not one of this suite's reports). ``title``: the heading, by default the
    run's (:func:`report_title`); ``verdict``: lines shown first, the first of them ``RESULT: WORD ...``
    (``conformance check``'s verdict), which also leads the page's <title>."""
    out = check_output(output_path(out), "report")
    runs, problems = load_for_report(paths)
    labels = [capped(label, LABEL_LIMIT) for label in run_labels(runs)]

    # --- the matrix: rows are spec/case, one column per implementation (backend) x device; inside a
    # cell one line per run (with two or more runs), a chip per dtype
    items: list[dict[str, Any]] = []
    item_index: dict[tuple[int, tuple], int] = {}
    rows: dict[tuple[str, str, str, str], dict] = {}
    cases: dict[str, dict] = {}
    for r_index, results in enumerate(runs):
        for key, context in (results.cases or {}).items():
            if key not in cases and isinstance(context, dict):
                cases[capped(key)] = _case_context(capped(context))
        for original in results.records:
            item_index[(r_index, item_key(original))] = len(items)
            record = capped(original)  # what the page shows of it
            items.append(_entry(record, results, r_index))
            kind, case = record.get("kind") or "case", record.get("case") or "(invalid spec)"
            row_key = (_group_of(record), record["spec"], kind, case)
            case_key = f"{record['spec']}::{case}"  # not `title`: that is the page's heading
            row = rows.setdefault(row_key, {
                "group": row_key[0], "spec": record["spec"], "kind": kind, "case": case, "op": record.get("op"),
                "cells": defaultdict(list),
                "title": case_key + (f" (line {cases[case_key].get('line')})"
                                     if isinstance(cases.get(case_key), dict) and cases[case_key].get("line") else "")})
            row["cells"][(record.get("backend") or "-", record.get("device") or "-")].append(len(items) - 1)
    matrix = _matrix(runs, labels, items, rows)
    diffs, default_diff, default_pair = _diffs(runs, item_index)

    env, package = _environment()
    data = {"items": items, "runs": labels, "tags": [run_tag(i) for i in range(len(runs))],
            "outcomes": list(outcomes.ALL), "cases": cases}
    heading = capped(title, TEXT_LIMIT) if title else report_title(runs, labels)
    verdict = [capped(line) for line in verdict or []]
    word = verdict[0].removeprefix("RESULT: ").split(" (")[0].split(":")[0].strip() if verdict else ""
    page = env.get_template("template.html.j2").render(
        title=heading, page_title=(f"{word} · {heading}" if word else heading), verdict=verdict,
        verdict_class=word.lower().replace(" ", "-"),
        css=package.joinpath("report.css").read_text("utf-8"), js=package.joinpath("report.js").read_text("utf-8"),
        data=data, runs=[capped(_run_summary(r, labels[i], i)) for i, r in enumerate(runs)], labels=labels,
        problems=problems, outcomes=outcomes.ALL, default_pair=default_pair, **matrix,
        charts=speed_charts(runs, labels, speed_baseline), speed_baseline=speed_baseline,
        diffs=diffs, default_diff=default_diff, generated=now(), total_items=len(items),
    )
    write_output(out, page, "report")
    return ReportBuild(out, runs, problems)


def _spans(values: list) -> list[dict[str, Any]]:
    """Consecutive equal values as (value, colspan) for header rows."""
    spans: list[dict[str, Any]] = []
    for value in values:
        if spans and spans[-1]["value"] == value:
            spans[-1]["span"] += 1
        else:
            spans.append({"value": value, "span": 1})
    return spans
