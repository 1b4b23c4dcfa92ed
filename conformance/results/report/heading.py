"""The page's heading and <title>: the run (its label), torch's version and, in a few words, what was
checked; never one item's name, never a list of every backend."""

from __future__ import annotations

from conformance.core.record import CANDIDATE
from conformance.results.report.common import DEVICE_ORDER, LABEL_LIMIT, backend_order, capped, order
from conformance.results.store import Results

DEFAULT_TITLE = "Sparse & masked semantics: compatibility report"
NAMED_AT_MOST = 3  # ops or backends named in the heading; more are counted ("5 ops", "14 backends")


def _names(runs: list[Results], field: str) -> list[str]:
    found = {str(r.get(field)) for results in runs for r in results.records if r.get(field)}
    known = {"backend": backend_order(runs), "device": DEVICE_ORDER}.get(field, ())
    return sorted(found, key=lambda v: order(v, known))


def _few(names: list[str], noun: str) -> str:
    """'a, b, c', or 'N <noun>s' beyond NAMED_AT_MOST; the candidate is always named."""
    if len(names) <= NAMED_AT_MOST:
        return ", ".join(names)
    if CANDIDATE in names:
        return f"{CANDIDATE} and {len(names) - 1} other {noun}s"
    return f"{len(names)} {noun}s"


def what_was_checked(runs: list[Results]) -> str:
    """'adagrad, coalesce on coo, candidate (cpu)', '5 ops on 14 backends (cpu)': the ops, backends and
    devices the runs' records have, named when few and counted when many."""
    ops, backends, devices = _names(runs, "op"), _names(runs, "backend"), _names(runs, "device")
    if not ops and not backends:
        return "no items"
    text = _few(ops, "op") or "(no op)"
    if backends:
        text += " on " + _few(backends, "backend")
    return text + (f" ({', '.join(devices)})" if devices else "")


def report_title(runs: list[Results], labels: list[str]) -> str:
    """The page's heading and <title>: the run (its label), torch's version and what was checked;
    for several runs, the runs compared. Never one item's name."""
    if not runs:
        return f"{DEFAULT_TITLE} (no readable results file)"
    versions = list(dict.fromkeys(f"torch {r.run.get('torch')}" for r in runs))
    what = capped(what_was_checked(runs), LABEL_LIMIT)
    if len(runs) == 1:
        label = labels[0]
        torch = "" if versions[0] in label else f" · {versions[0]}"
        return f"{label}{torch}: {what}"
    shown = " vs ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
    return f"{len(runs)} runs: {shown} · {', '.join(versions[:4])}: {what}"
