"""What the page knows of one item (embedded as JSON, shown in the details drawer): its fields, the
command that re-runs it, an xfail's known divergence, an unsupported item's reason, and the outputs
its implementation did not return itself."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from conformance.core.record import COMPILES, ItemRecord
from conformance.core.target import CandidateTarget
from conformance.core.types import Outcome
from conformance.core.record import CANDIDATE
from conformance.results.report.common import http_url
from conformance.results.rerun import command_from_record
from conformance.results.store import Results, item_key


def repro_command(record: ItemRecord, run: dict) -> str:
    """The command line that re-runs one item with the options of its run, from any directory
    (``python -m conformance replay``): rebuilt from the record's structured fields (node id, op,
    seed, profile) and its run's options, each argument shell-quoted; never the record's free-text
    ``rerun`` field, which a results file could make any command line at all."""
    try:
        run = _with_absolute_files(run, record.get("rerun"))
        without_rerun = record.copy()
        without_rerun.pop("rerun", None)
        return command_from_record(without_rerun, run)
    except (TypeError, AttributeError, KeyError):  # a field of the wrong type (an int profile): no command
        return ""


def _with_absolute_files(run: dict, rerun: Any) -> dict:
    """``run`` with each relative file candidate of its options named by the absolute path its record's
    ``rerun`` gives the same file (the run's own folder, which the results file does not otherwise
    keep); only a path that ends in the relative one, for the same op and attribute, is taken."""
    impls = (run.get("options") or {}).get("conformance_impl") if isinstance(run, dict) else None
    if not isinstance(rerun, str) or not isinstance(impls, list):
        return run
    try:
        words = shlex.split(rerun)
    except ValueError:
        return run
    named = [CandidateTarget.parse_or_none(value) for flag, value in zip(words, words[1:]) if flag == "--impl"]
    absolute = [t for t in named if t and t.is_file and Path(t.module).is_absolute()]
    changed = []
    for impl in impls:
        target = CandidateTarget.parse_or_none(impl)
        same = [t for t in absolute if target and target.is_file and not Path(target.module).is_absolute()
                and (t.op, t.attribute) == (target.op, target.attribute)
                and Path(t.module).parts[-len(Path(target.module).parts):] == Path(target.module).parts]
        changed.append(str(same[0]) if same else impl)
    return {**run, "options": {**run["options"], "conformance_impl": changed}}


def expected_vs_got(message: str | None) -> list[dict[str, str]]:
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


def reason_of(record: ItemRecord) -> str | None:
    """Why an item did not run: an unsupported item's reason (its message less "unsupported: "), a
    skipped one's (less "Skipped: "); None for the others."""
    message = record.get("message")
    if not isinstance(message, str) or record.get("outcome") not in (Outcome.UNSUPPORTED, Outcome.SKIPPED):
        return None
    for prefix in ("unsupported: ", "Skipped: "):
        message = message.removeprefix(prefix)
    return message.strip() or None


def derived_outputs(op: Any) -> dict[str, str]:
    """The outputs the suite computes from a candidate's others (:meth:`Op.computed_outputs`), by op name."""
    from conformance.ops import OPS  # lazy: the op records (Hypothesis, ~0.7 s), for a candidate's records only

    record = OPS.get(op) if isinstance(op, str) else None
    return record.computed_outputs() if record is not None else {}


def side_by_side(record: ItemRecord) -> dict | None:
    """The record's values (golden, stock torch, the implementation's), each output the implementation
    did not return itself marked ``not_returned`` with why and its value left out: a candidate's row
    never shows a value the suite computed (from a state that matches the golden one, that is the
    golden value, whatever the candidate's own arithmetic does with it)."""
    values = record.get("values")
    if not isinstance(values, dict):
        return values
    derived = derived_outputs(record.get("op")) if record.get("backend") == CANDIDATE else {}
    shown = {}
    for name, row in values.items():
        row = dict(row) if isinstance(row, dict) else {}
        if name in derived:
            row.update(got=None, not_returned=f"the candidate does not return {name}: the suite computes "
                                               f"{derived[name]} from the candidate's state, not its own {name}")
        elif row.get("got") is None and "got" not in row:
            row["not_returned"] = f"the implementation did not return {name}"
        shown[name] = row
    return shown


def entry(record: ItemRecord, results: Results, r_index: int) -> dict[str, Any]:
    """What the page knows of one item (embedded as JSON, shown in the item panel)."""
    kind = record.get("kind", "case")
    return {
        "run": r_index, "nodeid": record["nodeid"], "kind": record.get("kind"), "spec": record["spec"],
        "case": record.get("case"), "op": record.get("op"), "backend": record.get("backend"),
        "device": record.get("device"), "dtype": record.get("dtype"), "outcome": record["outcome"],
        "message": record.get("message"), "pairs": expected_vs_got(record.get("message")),
        "reason": reason_of(record),
        "max_abs_error": record.get("max_abs_error"), "max_rel_error": record.get("max_rel_error"),
        "seconds": record.get("seconds"), "timing": record.get("timing"),
        "compiles": record.get(COMPILES), "benchmark": record.get("benchmark"),
        "crashed": record.get("crashed", False), "repro": repro_command(record, results.run),
        "key": "|".join(str(k) for k in item_key(record)),
        "case_key": f"{record['spec']}::{record.get('case')}" if kind == "case" else None,
        "verdict": record.get("verdict"), "divergence": divergence_of(record),
        "torch_max_abs_error": record.get("torch_max_abs_error"), "values": side_by_side(record),
        "improvement": record.get("improvement"), "stale_divergence": record.get("stale_divergence"),
        "counterexample": record.get("counterexample"), "looks_like": record.get("looks_like"),
        "narrowed": record.get("narrowed"), "budget_reached": record.get("budget_reached"),
    }


def case_context(context: dict) -> dict:
    """A case's context from the results' cases map, its source's address as ``href`` when http(s)."""
    source = context.get("source")
    if isinstance(source, dict):
        return {**context, "source": {**source, "href": http_url(source.get("url") or source.get("link"))}}
    return context
