"""Reading results files for the report: each file on its own (one odd file never costs the report of
the others), what in a schema-valid file the page cannot show, and each run's column label."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

from conformance.core.target import CandidateTarget
from conformance.results.store import Results, ResultsError, load_results


def _non_finite(document: Any) -> str | None:
    """Where the first non-finite number is ("records/3/seconds"), or None; iterative, so any depth."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), document)]
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
            default_label(results)
        except ResultsError as exc:
            problems.append(exc)
        except RecursionError:
            problems.append(ResultsError(path, "nested too deeply to read (RecursionError): not a results file"))
        except Exception as exc:  # noqa: BLE001 - one odd file never costs the report of the others
            problems.append(ResultsError(path, f"cannot be shown ({type(exc).__name__}: {exc})"[:400]))
        else:
            runs.append(results)
    return runs, problems


def default_label(results: Results) -> str:
    """'torch X', and the candidate's module:attr when the run had one (what tells candidate runs apart)."""
    impls = (results.run.get("options") or {}).get("conformance_impl") or []
    names = [target.short_name if (target := CandidateTarget.parse_or_none(impl)) else str(impl) for impl in impls]
    return results.label + (f" + {', '.join(names)}" if names else "")


def run_labels(runs: list[Results]) -> list[str]:
    """Each run's column label: its --conformance-label, else 'torch X'; made unique by whichever of
    host, file name or position tells the runs that share a label apart."""
    labels = [r.label if r.run.get("label") else default_label(r) for r in runs]
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
