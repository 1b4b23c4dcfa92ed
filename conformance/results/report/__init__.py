"""The HTML compatibility report: any number of results files -> one self-contained HTML file.

``conformance report RESULTS... -o reports/index.html`` renders ``template.html.j2`` with the
report's CSS and JavaScript inlined and the item details embedded as JSON: it opens offline, from
a file or an artifact store, with no CDN. Sections: the runs (torch, devices, machine, commit), the
summary of outcomes per backend x op (each count a link to its rows), the coverage of the last run (per op: the
configurations its covering array ran and those torch refuses; per backend, the generated properties it ran and
those unsupported, with the reason), the matrix of spec/case x
backend x device x run (a chip per dtype, coloured by outcome; a click shows the item's message,
expected vs got, errors, timings and the command line that re-runs it), speed charts (inline SVG:
each backend's median time relative to ``--speed-baseline``, default the NumPy reference), and the
diff between any two runs. A results file that cannot be read, or that holds what the report cannot
show (a bare NaN, a negative median, ...), is named at the top of the report and left out; the
others still make the report. Only http(s) addresses become links.

One module a part of the page: ``common`` (orders, bounds, formatters), ``loading`` (reading the
files, the runs' labels), ``items`` (one item's details), ``summary`` (the Runs table and the
backend x op counts), ``matrix``, ``charts`` (Speed), ``diffs`` and ``heading``; this module puts
them on the page.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable

import jinja2

from conformance.core import outcomes
from conformance.core.text import safe_to_show
from conformance.results.coverage_map import coverage_rows
from conformance.results.report.charts import speed_charts
from conformance.results.report.common import (DEVICE_ORDER, DTYPE_SHORT, ITEMS_LIMIT, LABEL_LIMIT, TEXT_LIMIT,
                                               backend_order, capped, http_url, run_tag)
from conformance.results.report.diffs import MAX_DIFF_RUNS, diffs
from conformance.results.report.releases import KINDS as MOVED_KINDS, what_moved
from conformance.results.report.heading import DEFAULT_TITLE, report_title, what_was_checked
from conformance.results.report.items import divergence_of, entry, expected_vs_got, repro_command
from conformance.results.report.loading import load_for_report, report_problem, run_labels
from conformance.results.report.matrix import collect, matrix
from conformance.results.report.summary import SUMMARY_OUTCOMES, backend_op_summary, run_summary
from conformance.results.store import Results, ResultsError, check_output, now, write_output

__all__ = [
    "DEFAULT_TITLE", "DEVICE_ORDER", "DTYPE_SHORT", "ITEMS_LIMIT", "LABEL_LIMIT", "MAX_DIFF_RUNS",
    "TEXT_LIMIT", "ReportBuild", "backend_order", "build_report", "capped", "divergence_of", "entry", "expected_vs_got", "http_url",
    "load_for_report", "output_path", "repro_command", "report_problem", "report_title", "run_labels", "run_tag",
    "speed_charts", "what_was_checked",
]


@dataclass
class ReportBuild:
    path: Path
    runs: list[Results]
    problems: list[ResultsError]


def _environment():
    """Jinja with autoescape, StrictUndefined and a ``tojson`` that writes <, >, &, ' (and DEL) as \\u
    escapes (any string survives inside <script>), strict JSON (no NaN) and compact."""
    package = resources.files("conformance.results.report")
    env = jinja2.Environment(loader=jinja2.FunctionLoader(lambda name: package.joinpath(name).read_text("utf-8")),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.policies["json.dumps_kwargs"] = {"sort_keys": False, "allow_nan": False, "separators": (",", ":")}
    env.policies["json.dumps_function"] = lambda value, **kwargs: json.dumps(value, **kwargs).replace("\x7f", "\\u007f")
    env.filters["http_url"] = http_url
    return env, package


def output_path(out: str | Path) -> Path:
    """``-o``: a file to write, or a folder (one that exists, or a path ending in /) for its index.html."""
    folder = str(out).endswith(("/", os.sep))
    out = Path(out)
    return out / "index.html" if folder or out.is_dir() else out


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
    # the matrix: rows are spec/case, one column per implementation (backend) x device; inside a
    # cell one line per run (with two or more runs), a chip per dtype
    items, item_index, rows, cases = collect(runs)
    all_diffs, default_diff, default_pair = diffs(runs, item_index)

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
        data=data, runs=[capped(run_summary(r, labels[i], i)) for i, r in enumerate(runs)], labels=labels,
        problems=problems, outcomes=outcomes.ALL, default_pair=default_pair, **matrix(runs, labels, items, rows),
        summary=backend_op_summary(items, labels, backend_order(runs)), summary_outcomes=SUMMARY_OUTCOMES,
        charts=speed_charts(runs, labels, speed_baseline), speed_baseline=speed_baseline,
        diffs=all_diffs, default_diff=default_diff, generated=now(), total_items=len(items),
        coverage=coverage_rows(runs[-1].records, backend_order(runs)) if runs else [],
        moved=what_moved(runs, item_index), moved_kinds=MOVED_KINDS,
    )
    # a label's or hostname's control characters shown as \x1b (the data block's JSON holds none raw)
    write_output(out, safe_to_show(page), "report")
    return ReportBuild(out, runs, problems)
