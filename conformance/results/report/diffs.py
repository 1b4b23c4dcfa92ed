"""The Diff section: what changed between any two runs (every ordered pair up to MAX_DIFF_RUNS runs,
consecutive pairs beyond), by the gate's rules; it opens on the pair that differs most."""

from __future__ import annotations

from conformance.results.gate import diff_runs
from conformance.results.report.common import capped, fmt_seconds
from conformance.results.store import Results

MAX_DIFF_RUNS = 6  # every ordered pair of runs up to this many runs; consecutive pairs beyond


def _pair(runs: list[Results], a: int, b: int, item_index: dict) -> dict:
    """Run ``a`` -> run ``b``: each kind of change, every change linking to its item."""
    diff = diff_runs(runs[a], runs[b])

    def ref(change, run_index):
        record = change.head if run_index == b else change.base
        return {"label": capped(change.label), "i": item_index.get((run_index, change.key)),
                "from": change.base_outcome, "to": change.head_outcome,
                "message": capped((record or {}).get("message") or "")}

    def timing(t):
        return {"label": capped(t.label), "i": item_index.get((b, t.key)), "ratio": t.ratio, "p": t.p_value,
                "base": fmt_seconds(t.base_median), "head": fmt_seconds(t.head_median)}

    return {
        "base": a, "head": b, "id": f"diff-{a}-{b}",
        "regressed": [ref(c, b) for c in diff.regressed], "improved": [ref(c, b) for c in diff.improved],
        "changed": [ref(c, b) for c in diff.changed], "added": [ref(c, b) for c in diff.added],
        "removed": [ref(c, a) for c in diff.removed],
        "slower": [timing(t) for t in diff.slower], "faster": [timing(t) for t in diff.faster],
        "compared": diff.compared,
    }


def _weight(d: dict) -> tuple:
    changes = sum(len(d[k]) for k in ("regressed", "improved", "changed", "slower", "faster"))
    # a pair that differs first; then the one comparing most items; then earlier -> later runs
    return (changes > 0, changes + len(d["added"]) + len(d["removed"]) > 0, d["compared"], d["base"] < d["head"])


def diffs(runs: list[Results], item_index: dict) -> tuple[list[dict], str | None, tuple[int, int]]:
    """Every ordered pair of runs (consecutive ones beyond MAX_DIFF_RUNS), the one shown first, its pair."""
    if len(runs) < 2:
        return [], None, (0, max(len(runs) - 1, 0))
    pairs = ([(a, b) for a in range(len(runs)) for b in range(len(runs)) if a != b]
             if len(runs) <= MAX_DIFF_RUNS else [(a, a + 1) for a in range(len(runs) - 1)])
    found = [_pair(runs, a, b, item_index) for a, b in pairs]
    best = max(found, key=_weight)
    return found, best["id"], (best["base"], best["head"])
