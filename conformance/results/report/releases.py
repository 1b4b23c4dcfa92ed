"""The What-moved section: given runs of two or more torch releases, what changed from each release to
the next, releases in version order (of several runs of one release, the last given). Each change
shows the item's message on both sides, so that a missing API ("not in torch 2.1: ..."), an error of
the suite's and a real change of torch's read differently; each links to its item."""

from __future__ import annotations

import re
from typing import Any, Mapping

from packaging.version import InvalidVersion, Version

from conformance.results.gate import diff_runs
from conformance.results.report.common import capped
from conformance.results.store import Results, key_label

KINDS = (("started_failing", "started failing (passed, now failed or error)"),
         ("started_passing", "started passing"),
         ("outcome", "another outcome"),
         ("reason", "the same outcome, another reason"))


def release_of(run: Results) -> Version | None:
    """The torch release a run ran on (its local part, ``+cpu``, dropped); None when it does not say."""
    try:
        return Version(str(run.run.get("torch") or "").split("+")[0])
    except InvalidVersion:
        return None


def release_order(runs: list[Results]) -> list[int]:
    """Indices of one run per torch release (the last given of each), in release order; empty when the
    runs are of fewer than two releases."""
    last: dict[Version, int] = {}
    for index, run in enumerate(runs):
        release = release_of(run)
        if release is not None:
            last[release] = index
    return [last[release] for release in sorted(last)] if len(last) >= 2 else []


def _change(key, base: Mapping[str, Any] | None, head: Mapping[str, Any] | None, head_index: int,
            item_index: dict) -> dict:
    return {"label": capped(key_label(key)), "i": item_index.get((head_index, key)),
            "from": (base or {}).get("outcome"), "to": (head or {}).get("outcome"),
            "was": capped((base or {}).get("message") or ""), "now": capped((head or {}).get("message") or "")}


def _reason(record: Mapping[str, Any]) -> str:
    """A record's message less what differs between any two releases' runs: numbers (the release's own,
    "not in torch 2.1"; triton's version; an error's size) and the venv a path runs through."""
    return re.sub(r"\d+", "N", re.sub(r"/\.nox/[^/\s]+", "/.nox/VENV", record.get("message") or ""))


def what_moved(runs: list[Results], item_index: dict) -> list[dict]:
    """For each release and the next: the items that started failing, started passing, changed outcome
    otherwise, or kept a non-passing outcome for another reason (its message, numbers and venv paths aside)."""
    order = release_order(runs)
    steps = []
    for a, b in zip(order, order[1:]):
        diff = diff_runs(runs[a], runs[b], timing=False)
        base, head = runs[a].by_key(), runs[b].by_key()
        moved = {"started_failing": [_change(c.key, c.base, c.head, b, item_index) for c in diff.regressed],
                 "started_passing": [_change(c.key, c.base, c.head, b, item_index) for c in diff.improved],
                 "outcome": [_change(c.key, c.base, c.head, b, item_index) for c in diff.changed],
                 "reason": [_change(key, base[key], record, b, item_index) for key, record in head.items()
                            if key in base and record["outcome"] == base[key]["outcome"]
                            and record["outcome"] != "passed"
                            and _reason(record) != _reason(base[key])]}
        steps.append({"base": a, "head": b, "from": str(release_of(runs[a])), "to": str(release_of(runs[b])),
                      "compared": diff.compared, "kinds": moved})
    return steps


def moved_lines(steps: list[dict]) -> list[str]:
    """The section as text: one line per release step, then one per change."""
    lines = []
    for step in steps:
        counts = ", ".join(f"{len(step['kinds'][name])} {title.split(' (')[0]}" for name, title in KINDS)
        lines.append(f"torch {step['from']} -> {step['to']}: {counts} ({step['compared']} items in both)")
        for name, title in KINDS:
            for change in step["kinds"][name]:
                lines.append(f"  {title.split(' (')[0]}: {change['label']}: {change['from']} -> {change['to']}"
                             + (f" ({change['now']})" if change["now"] else ""))
    return lines
