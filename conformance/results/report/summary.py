"""The summaries at the top of the page: the Runs table's line per run, and the per-backend x op
table of outcome counts (what the console's summary says), each count a link to its rows."""

from __future__ import annotations

from collections import Counter
from types import MappingProxyType
from typing import Any

from conformance.core.types import Outcome
from conformance.results.report.common import counts, order, run_tag
from conformance.results.store import Results

# the outcomes a summary cell counts, in the order it shows them (every outcome)
SUMMARY_OUTCOMES = (Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.XFAIL, Outcome.XPASS,
                    Outcome.UNSUPPORTED, Outcome.SKIPPED)


def run_summary(results: Results, label: str, index: int) -> dict[str, Any]:
    """The Runs table's line for one run: every field optional (the schema requires few)."""
    run = results.run
    given_suite, given_devices = run.get("suite"), run.get("devices")
    suite = given_suite if isinstance(given_suite, dict) else {}
    devices = given_devices if isinstance(given_devices, dict) else {}
    return {
        "label": label, "tag": run_tag(index), "path": str(results.path), "counts": counts(results.records),
        "records": len(results.records), "torch": run.get("torch"), "torch_xla": run.get("torch_xla"),
        "python": run.get("python"), "numpy": run.get("numpy"), "hostname": run.get("hostname"),
        "cpu": " ×".join(str(v) for v in (run.get("cpu_model"), run.get("cpu_count")) if v is not None),
        "commit": str(suite.get("git_commit") or "")[:10], "dirty": suite.get("git_dirty"),
        "started": run.get("started"), "finished": run.get("finished"), "status": run.get("status"),
        "not_run": len(run.get("not_run") or []),
        "devices": ", ".join(f"{name}: {info.get('name') or 'unavailable (' + str(info.get('unavailable')) + ')'}"
                             if isinstance(info, dict) else str(name) for name, info in devices.items()),
    }


SHORT = MappingProxyType({Outcome.PASSED: "pass", Outcome.FAILED: "fail", Outcome.ERROR: "error",
                          Outcome.XFAIL: "xfail", Outcome.XPASS: "xpass", Outcome.UNSUPPORTED: "unsup.",
                          Outcome.SKIPPED: "skip"})
ALL_OPS = ""  # the op of a backend's total over every op


def backend_op_summary(items: list[dict], labels: list[str], backends: tuple[str, ...]) -> dict[str, Any]:
    """Per backend (in the order ``backends``, :func:`~conformance.results.report.common.backend_order`; and
    run, with two or more) x op: how many items passed, failed, xfailed, were unsupported, ... -- a group
    of columns per op (its outcomes that occur), the backends' totals over every op first; each count
    with what finds its rows (backend, op, outcome, run)."""
    found: Counter = Counter()
    for it in items:
        for op in (ALL_OPS, it["op"] or "-"):
            found[(it["backend"] or "-", op, it["run"], it["outcome"])] += 1
    ops = [ALL_OPS] + sorted({it["op"] or "-" for it in items})
    groups = [{"op": op, "name": op or "all ops",
               "outcomes": [{"outcome": o, "short": SHORT[o]} for o in SUMMARY_OUTCOMES
                            if any(n for (_, where, _, outcome), n in found.items() if where == op and outcome == o)]}
              for op in ops]
    rows = []
    for backend in sorted({it["backend"] or "-" for it in items}, key=lambda b: order(b, backends)):
        for run in sorted({it["run"] for it in items}):
            if not any(found[(backend, ALL_OPS, run, o)] for o in SUMMARY_OUTCOMES):
                continue  # this run did not run this backend
            rows.append({"backend": backend, "run": run, "tag": run_tag(run), "label": labels[run],
                         "cells": [{"op": group["op"], "outcome": o["outcome"], "first": k == 0,
                                    "n": found[(backend, group["op"], run, o["outcome"])]}
                                   for group in groups for k, o in enumerate(group["outcomes"])]})
    return {"groups": [g for g in groups if g["outcomes"]], "rows": rows}
