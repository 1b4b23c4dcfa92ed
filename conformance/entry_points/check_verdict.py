"""check's verdict: what one check's results file says about the candidate (:func:`judge`), with the
exit status of each verdict; also what the reusable workflow's merge job judges each merged run by."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from conformance.core.record import CANDIDATE, ItemRecord

PASS, FAIL, COULD_NOT_JUDGE, UNSUPPORTED, USAGE = 0, 1, 2, 3, 4


@dataclass
class Verdict:
    code: int
    word: str
    reason: str
    counts: Counter = field(default_factory=Counter)
    failed: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)
    torch_findings: list[str] = field(default_factory=list)  # stock torch's own items that failed beside yours

    def lines(self) -> list[str]:
        counts = ", ".join(f"{n} {o}" for o, n in sorted(self.counts.items()))
        head = f"RESULT: {self.word}" + (f" ({counts})" if counts else "") + (f": {self.reason}" if self.reason else "")
        crashed = {item.split(" (")[0] for item in self.crashed}
        findings = [f"  torch:   {item} (a finding about stock torch, not your implementation)"
                    for item in self.torch_findings]
        return [head, *(f"  crashed: {item}" for item in self.crashed),
                *(f"  failed:  {item}" for item in self.failed if item not in crashed), *findings]


def judge(document: dict | None, *, run_id: str, status: int, ops: list[str], signal_name: str | None = None,
          problem: str | None = None) -> Verdict:
    """The verdict of one check from the results file its run wrote (None: there is none)."""
    if document is None:
        why = problem or "no results file was written"
        return Verdict(COULD_NOT_JUDGE, "COULD NOT JUDGE",
                       f"{why}; pytest exited with status {status}" + (f" ({signal_name})" if signal_name else ""))
    run = document.get("run") or {}
    if run.get("id") != run_id:
        return Verdict(COULD_NOT_JUDGE, "COULD NOT JUDGE",
                       f"the results file is another run's (id {run.get('id')!r}, not {run_id!r}); pytest exited "
                       f"with status {status}")
    records: list[ItemRecord] = document.get("records") or []
    candidate = [r for r in records if r.get("backend") == CANDIDATE]
    counts = Counter(r.get("outcome") for r in candidate)
    bad = [r for r in candidate if r.get("outcome") in ("failed", "error")]
    verdict = Verdict(COULD_NOT_JUDGE, "COULD NOT JUDGE", "", counts,
                      failed=[r.get("nodeid", "?") for r in bad],
                      crashed=[f"{r.get('nodeid', '?')} ({_crash_reason(r)})" for r in bad if r.get("crashed")])
    complete, incomplete = _completeness(run)
    if bad:
        return _failed(verdict, bad, candidate, incomplete)
    if not complete:
        verdict.reason = incomplete
        return verdict
    missing = [op for op in ops if not any(r.get("op") == op for r in candidate)]
    if missing:
        verdict.reason = f"no candidate item of {', '.join(missing)} was collected (a -k or --conformance-* option?)"
        return verdict
    others = [r for r in records if r.get("backend") != CANDIDATE and r.get("outcome") in ("failed", "error")]
    # stock torch's own items beside the candidate's: a failure there is a finding about torch (the
    # candidate's items are judged against the reference on their own), never the user's problem
    findings = [r for r in others if _is_stock_torch(r)]
    verdict.torch_findings = [r.get("nodeid", "?") for r in findings]
    others = [r for r in others if not _is_stock_torch(r)]
    if others:
        verdict.reason = (f"{len(others)} item(s) of the specs themselves failed or errored "
                          f"(e.g. {others[0].get('nodeid')}): the suite, not the candidate, needs a look")
        return verdict
    ran = sum(n for outcome, n in counts.items() if outcome in ("passed", "xfail", "xpass"))
    if ran == 0:
        return _nothing_ran(verdict, counts, candidate)
    if status != 0 and not (status == 1 and findings):
        verdict.reason = f"pytest exited with status {status} although every candidate item passed"
        return verdict
    verdict.code, verdict.word = PASS, "PASS"
    if findings:
        verdict.reason = (f"stock torch failed {len(findings)} item(s) beside yours: a finding about torch, not your "
                          f"implementation (worth reporting upstream; docs/findings.md lists the known ones)")
    return verdict


def _completeness(run: dict) -> tuple[bool, str]:
    """Whether the run completed with every item run, and if not, why in words ("" when it did)."""
    not_run = list(run.get("not_run") or [])
    complete = run.get("status") == "complete" and not not_run
    incomplete = "" if complete else (f"the run did not complete (status {run.get('status')!r}"
                                      + (f", interrupted by {run['interrupted_by']}" if run.get("interrupted_by") else "")
                                      + (f", {len(not_run)} items not run" if not_run else "") + ")")
    return complete, incomplete


def _failed(verdict: Verdict, bad: list[ItemRecord], candidate: list[ItemRecord], incomplete: str) -> Verdict:
    """``verdict`` made FAIL for the candidate's ``bad`` items, saying when it crashed or hung on every
    input tried (and the run stopped early)."""
    verdict.code, verdict.word = FAIL, "FAIL"
    verdict.reason = f"{len(bad)} candidate item(s) failed or errored" + (f"; {incomplete}" if incomplete else "")
    tried = [r for r in candidate if r.get("outcome") not in ("skipped", "unsupported")]
    if incomplete and all(_crashed_or_hung(r) for r in tried):  # --max-crashes stopped it, or a signal
        verdict.reason = (f"the candidate crashed or hung on every input tried ({len(tried)} item(s), none "
                          f"passed); {incomplete}")
    return verdict


def _nothing_ran(verdict: Verdict, counts: Counter, candidate: list[ItemRecord]) -> Verdict:
    """``verdict`` when no candidate item ran: UNSUPPORTED when they were unsupported, else could not
    judge, with the commonest reasons they were skipped."""
    if counts.get("unsupported"):
        verdict.code, verdict.word = UNSUPPORTED, "UNSUPPORTED"
        verdict.reason = "every candidate item was unsupported: nothing was checked"
    else:
        why = Counter(r.get("message") or "" for r in candidate if r.get("outcome") == "skipped" and r.get("message"))
        verdict.reason = "no candidate item ran" + (
            f": every one was skipped ({'; '.join(reason for reason, _ in why.most_common(2))})" if why else "")
    return verdict


def _is_stock_torch(record: ItemRecord) -> bool:
    """Whether ``record`` is an item of stock torch's own backend for its op (Op.stock_backend)."""
    from conformance.ops import OPS  # lazy: the op records import torch; check imports this module

    op = OPS.get(str(record.get("op")))
    return op is not None and bool(record.get("backend")) and record.get("backend") == op.stock_backend


def _crashed_or_hung(record: ItemRecord) -> bool:
    """The item's process died (crash, native hang) or it ran past its timeout (the rule of the run's
    circuit breaker, conformance/run/breaker.py, which check's --max-crashes sets)."""
    return bool(record.get("crashed") or record.get("timed_out")) or (
        record.get("outcome") in ("error", "failed") and "from pytest-timeout" in str(record.get("message") or ""))


def _crash_reason(record: ItemRecord) -> str:
    """How a crashed item's worker ended, in a few words (its record's message has the rest)."""
    if record.get("timed_out"):
        return "timed out in native code"
    if record.get("signal"):
        return f"killed by {record['signal']}"
    found = re.search(r"exited with status -?\d+", str(record.get("message") or ""))
    return found.group(0) if found else "the worker process died"


def _load(path: Path) -> tuple[dict | None, str | None]:
    # lazy: at module level the package would stand on 7 levels (tests/test_layout.py)
    from conformance.results.store import ResultsError, load_results

    if not path.exists():
        return None, "pytest wrote no results file"
    try:
        results = load_results(path, max_bytes=None)  # this run's own file, however large its messages made it
    except ResultsError as exc:
        return None, f"the results file is unusable ({exc.message})"
    return {"run": results.run, "records": results.records}, None
