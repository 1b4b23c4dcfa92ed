"""The pull-request gate: compare a candidate run with a baseline run.

``conformance gate --baseline A.json --candidate B.json`` exits

0  nothing regressed
1  an item that passed in the baseline failed or errored in the candidate, or a backend got
   slower on a benchmark: the median grew by more than ``--ratio`` (default 10%), the baseline's
   median is at least ``--min-duration`` (default 1 ms), and a one-sided Mann-Whitney U test on the
   two runs' samples says so at ``--alpha`` (default 0.01)
2  the two files cannot be compared: a file is unreadable, not valid against the results schema or
   of another schema version, has a key twice in one JSON object or an item recorded twice, the baseline is incomplete (its run not ``complete``) or empty
   (unless ``--allow-incomplete-baseline``), items of the baseline are missing from the candidate
   or skipped there, or timings come from different machines; or an option is unusable (a
   ``--ratio``, ``--alpha`` or ``--min-duration`` that is NaN, infinite or out of range, a
   ``--markdown`` path that is a device or a folder); or anything else went wrong (one line, never a
   traceback and never 1)

With ``--changed-files``/``--base-ref`` only the items of the ops those files select (see
``conformance/results/paths.yaml``) are compared. The diff (:func:`diff_runs`) is shared with the report.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Iterable

from conformance.core.record import ItemRecord
from conformance.core.text import safe_to_show
from conformance.results.store import Results, item_key, key_label

# the outcomes by name (conformance.core.types.Outcome is a str enum, equal to them): the gate's command
# line is parsed before torch, which conformance.core.types imports, is loaded
PASSING = ("passed", "xpass")
BROKEN = ("failed", "error")
UNSUPPORTED = "unsupported"

DEFAULT_RATIO = 0.10
DEFAULT_ALPHA = 0.01
DEFAULT_MIN_DURATION = 0.001


@dataclass
class ItemChange:
    key: tuple
    base: ItemRecord | None
    head: ItemRecord | None

    @property
    def label(self) -> str:
        return key_label(self.key)

    @property
    def base_outcome(self) -> str | None:
        return self.base["outcome"] if self.base else None

    @property
    def head_outcome(self) -> str | None:
        return self.head["outcome"] if self.head else None

    @property
    def head_message(self) -> str:
        message = (self.head or {}).get("message") or ""
        return message.strip().splitlines()[0][:200] if message.strip() else ""


@dataclass
class TimingChange:
    key: tuple
    base_median: float
    head_median: float
    p_value: float
    base_samples: int
    head_samples: int

    @property
    def label(self) -> str:
        return key_label(self.key)

    @property
    def ratio(self) -> float:
        return self.head_median / self.base_median if self.base_median > 0 else math.inf


@dataclass
class RunDiff:
    regressed: list[ItemChange] = field(default_factory=list)  # passed -> failed/error
    improved: list[ItemChange] = field(default_factory=list)   # not passing -> passing
    changed: list[ItemChange] = field(default_factory=list)    # any other change of outcome
    added: list[ItemChange] = field(default_factory=list)      # only in the candidate
    removed: list[ItemChange] = field(default_factory=list)    # only in the baseline
    slower: list[TimingChange] = field(default_factory=list)
    faster: list[TimingChange] = field(default_factory=list)
    compared: int = 0
    timings_compared: int = 0


def _median(values: list[float]) -> float:
    data = sorted(values)
    mid = len(data) // 2
    return data[mid] if len(data) % 2 else (data[mid - 1] + data[mid]) / 2


def _samples(record: ItemRecord | None) -> list[float] | None:
    timing = (record or {}).get("timing") or {}
    samples = timing.get("samples")
    return [float(s) for s in samples] if samples else None


def compare_timing(key: tuple, base: list[float], head: list[float]) -> tuple[TimingChange, TimingChange]:
    """(the change judged as slower, the same judged as faster): one-sided Mann-Whitney U p-values."""
    from scipy.stats import mannwhitneyu  # lazy: ~4 s, only when timings are compared; cli imports this module

    base_median, head_median = _median(base), _median(head)
    if len(set(base) | set(head)) == 1:  # all equal: no evidence either way
        p_slower = p_faster = 1.0
    else:
        p_slower = float(mannwhitneyu(head, base, alternative="greater").pvalue)
        p_faster = float(mannwhitneyu(head, base, alternative="less").pvalue)
    return (TimingChange(key, base_median, head_median, p_slower, len(base), len(head)),
            TimingChange(key, base_median, head_median, p_faster, len(base), len(head)))


def in_scope(record: ItemRecord, ops: set[str] | None) -> bool:
    return ops is None or record.get("op") in ops or record.get("op") is None


def diff_runs(base: Results, head: Results, *, ops: set[str] | None = None, ratio: float = DEFAULT_RATIO,
              alpha: float = DEFAULT_ALPHA, min_duration: float = DEFAULT_MIN_DURATION,
              timing: bool = True) -> RunDiff:
    """Compare two runs item by item (and benchmark by benchmark), restricted to ``ops`` if given."""
    base_items = {k: r for k, r in base.by_key().items() if in_scope(r, ops)}
    head_items = {k: r for k, r in head.by_key().items() if in_scope(r, ops)}
    invalid_specs = {r["spec"]: r for r in head_items.values() if r.get("kind") == "invalid-spec"}
    diff = RunDiff()
    for key, b in base_items.items():
        h = head_items.get(key)
        if h is None:
            if b.get("spec") in invalid_specs and b["outcome"] in PASSING:
                diff.regressed.append(ItemChange(key, b, invalid_specs[b["spec"]]))
            else:
                diff.removed.append(ItemChange(key, b, None))
            continue
        diff.compared += 1
        if b["outcome"] in PASSING and h["outcome"] in BROKEN:
            diff.regressed.append(ItemChange(key, b, h))
        elif h["outcome"] in PASSING and b["outcome"] not in PASSING and b["outcome"] != "skipped":
            diff.improved.append(ItemChange(key, b, h))
        elif h["outcome"] != b["outcome"]:
            diff.changed.append(ItemChange(key, b, h))
        if timing and b["outcome"] in PASSING and h["outcome"] in PASSING:
            base_samples, head_samples = _samples(b), _samples(h)
            if base_samples and head_samples:
                diff.timings_compared += 1
                slower, faster = compare_timing(key, base_samples, head_samples)
                if slower.base_median >= min_duration:
                    if slower.ratio > 1 + ratio and slower.p_value < alpha:
                        diff.slower.append(slower)
                    elif faster.ratio < 1 / (1 + ratio) and faster.p_value < alpha:
                        diff.faster.append(faster)
    for key, h in head_items.items():
        if key not in base_items:
            diff.added.append(ItemChange(key, None, h))
    return diff


# ------------------------------------------------------------------ the gate


@dataclass
class GateResult:
    exit_code: int
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _describe(results: Results) -> str:
    run = results.run
    commit = (run.get("suite") or {}).get("git_commit")
    commit = f", suite {commit[:10]}" if commit else ""
    host = f", {run['hostname']}" if run.get("hostname") else ""
    return f"{results.path} (torch {run.get('torch')}{host}, {run.get('status')}{commit})"


def _fmt_seconds(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _listing(title: str, entries: list[str], limit: int) -> list[str]:
    if not entries:
        return []
    lines = [title]
    lines += [f"  {entry}" for entry in entries[:limit]]
    if len(entries) > limit:
        lines.append(f"  ... and {len(entries) - limit} more")
    return lines


def incomplete_baseline(base: Results) -> str | None:
    """Why ``base`` cannot stand as a baseline (its run is not complete, or it has no records), or None."""
    status = base.run.get("status")
    expected = base.run.get("records_expected")
    counts = f"{len(base.records)} of {expected}" if expected is not None else f"{len(base.records)}"
    if status != "complete":
        not_run = len(base.run.get("not_run") or [])
        return (f"the baseline {base.path} is {status}, not complete ({counts} items recorded"
                + (f", {not_run} collected items not run" if not_run else "") + ")")
    if not base.records:
        return f"the baseline {base.path} is empty (its run recorded no items)"
    return None


def duplicate_records(results: Results) -> str | None:
    """Why ``results`` cannot be gated because an item has two records (which one counts would be
    up to the reader: a "failed" then a "passed" must not read as a pass), or None."""
    seen: dict[tuple, int] = {}
    duplicates: list[tuple] = []
    for record in results.records:
        key = item_key(record)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 2:
            duplicates.append(key)
    if not duplicates:
        return None
    shown = ", ".join(key_label(key) for key in duplicates[:3]) + (", ..." if len(duplicates) > 3 else "")
    return (f"{results.path} has {len(duplicates)} item(s) recorded more than once ({shown}): "
            "not a file a run of this suite writes")


def run_gate(base: Results, head: Results, *, ops: set[str] | None = None, scope_note: str | None = None,
             ratio: float = DEFAULT_RATIO, alpha: float = DEFAULT_ALPHA, min_duration: float = DEFAULT_MIN_DURATION,
             allow_different_machine: bool = False, skip_timing: bool = False,
             allow_incomplete_baseline: bool = False, limit: int = 25) -> GateResult:
    lines = ["conformance gate",
             f"  baseline:  {_describe(base)}",
             f"  candidate: {_describe(head)}"]
    if scope_note:
        lines.append(f"  scope:     {scope_note}")
    refused = _refused(base, head, allow_incomplete_baseline)
    if refused:
        return GateResult(2, lines + refused)
    incomplete = incomplete_baseline(base)
    if incomplete:
        lines.append(f"  warning: {incomplete}; compared anyway (--allow-incomplete-baseline): "
                     "items it lacks are not gated")

    same_machine = (base.run.get("machine", {}).get("fingerprint") == head.run.get("machine", {}).get("fingerprint"))
    compare_timings = not skip_timing and (same_machine or allow_different_machine)
    diff = diff_runs(base, head, ops=ops, ratio=ratio, alpha=alpha, min_duration=min_duration,
                     timing=compare_timings)
    problems, warnings = _problems(base, head, diff, ops=ops, same_machine=same_machine, skip_timing=skip_timing,
                                   allow_different_machine=allow_different_machine)
    lines += warnings + _run_notes(base, head)
    lines += _findings(diff, problems, ratio=ratio, alpha=alpha, min_duration=min_duration, limit=limit)
    exit_code, result = _result(diff, problems, incomplete)
    lines.append(result)
    return GateResult(exit_code, lines)


def _refused(base: Results, head: Results, allow_incomplete_baseline: bool) -> list[str]:
    """The lines refusing to compare at all (an item recorded twice, an incomplete baseline not
    allowed), or none."""
    duplicated = [why for why in (duplicate_records(base), duplicate_records(head)) if why]
    if duplicated:
        return [f"CANNOT COMPARE: {why}" for why in duplicated] + ["RESULT: NOT COMPARABLE (duplicate records)"]
    incomplete = incomplete_baseline(base)
    if incomplete and not allow_incomplete_baseline:
        return [f"CANNOT COMPARE: {incomplete}: items it lacks could regress unseen",
                "  (run the baseline again to completion, or give --allow-incomplete-baseline to gate only "
                "the items it has)",
                "RESULT: NOT COMPARABLE (incomplete baseline)"]
    return []


def _problems(base: Results, head: Results, diff: RunDiff, *, ops: set[str] | None, same_machine: bool,
              skip_timing: bool, allow_different_machine: bool) -> tuple[list[str], list[str]]:
    """What keeps the two runs from being compared (timings from different machines, items of the
    baseline missing or skipped in the candidate), and the warnings of what is compared anyway."""
    problems: list[str] = []
    warnings: list[str] = []
    has_timings = any(_samples(r) for r in base.records if in_scope(r, ops)) and \
        any(_samples(r) for r in head.records if in_scope(r, ops))
    if has_timings and not skip_timing and not same_machine:
        b, h = base.run, head.run
        text = (f"timings come from different machines: baseline {b.get('cpu_model')} x{b.get('cpu_count')} "
                f"on {b.get('hostname')}, candidate {h.get('cpu_model')} x{h.get('cpu_count')} on {h.get('hostname')}")
        if allow_different_machine:
            warnings.append(f"  warning: {text}; compared anyway (--allow-different-machine)")
        else:
            problems.append(f"{text} (use --skip-timing to gate correctness only, or "
                            "--allow-different-machine to compare anyway)")
    if diff.removed:
        problems.append(f"{len(diff.removed)} item(s) of the baseline are missing from the candidate "
                        "(a different selection of backends, devices or ops, or an interrupted run)")
    not_run = [c for c in diff.changed if c.base_outcome in PASSING and c.head_outcome == "skipped"]
    if not_run:
        reason = (not_run[0].head or {}).get("message") or "skipped"
        problems.append(f"{len(not_run)} item(s) that passed in the baseline were skipped in the candidate, "
                        f"e.g. {not_run[0].label}: {reason.splitlines()[0][:150]}")
    return problems, warnings


def _run_notes(base: Results, head: Results) -> list[str]:
    """A warning when the candidate run is not complete, a note when the torch versions differ."""
    lines = []
    if head.run.get("status") != "complete":
        not_run = len(head.run.get("not_run") or [])
        lines.append(f"  warning: the candidate run is {head.run.get('status')}"
                     + (f" ({not_run} collected items not run)" if not_run else ""))
    if base.run.get("torch") != head.run.get("torch"):
        lines.append(f"  note: torch versions differ ({base.run.get('torch')} vs {head.run.get('torch')})")
    return lines


def _findings(diff: RunDiff, problems: list[str], *, ratio: float, alpha: float, min_duration: float,
              limit: int) -> list[str]:
    """What was compared and what changed, worst first: regressions, slower benchmarks, problems,
    then the changes that do not fail the gate."""
    lost = [c for c in diff.changed if c.base_outcome in PASSING and c.head_outcome == UNSUPPORTED]
    lines = [f"  compared {diff.compared} items and {diff.timings_compared} benchmark timings "
             f"(slower means: median +{ratio:.0%} or more, Mann-Whitney p < {alpha:g}, "
             f"baseline median >= {_fmt_seconds(min_duration)})"]
    lines += _listing(f"REGRESSED ({len(diff.regressed)}): passed in the baseline, failed or error in the candidate",
                      [f"{c.label}: {c.base_outcome} -> {c.head_outcome}"
                       + (f" -- {c.head_message}" if c.head_message else "") for c in diff.regressed], limit)
    lines += _listing(f"SLOWER ({len(diff.slower)}):",
                      [f"{t.label}: median {_fmt_seconds(t.base_median)} -> {_fmt_seconds(t.head_median)} "
                       f"(x{t.ratio:.2f}, p={t.p_value:.3g}, {t.base_samples} vs {t.head_samples} samples)"
                       for t in diff.slower], limit)
    lines += _listing("NOT COMPARABLE:", problems, limit)
    lines += _listing(f"no longer supported ({len(lost)}; passed in the baseline, unsupported in the candidate -- "
                      "not counted as a regression):",
                      [f"{c.label}" + (f" -- {c.head_message}" if c.head_message else "") for c in lost], 10)
    lines += _listing(f"missing from the candidate ({len(diff.removed)}):", [c.label for c in diff.removed], 10)
    lines += _listing(f"improved ({len(diff.improved)}):",
                      [f"{c.label}: {c.base_outcome} -> {c.head_outcome}" for c in diff.improved], 10)
    lines += _listing(f"faster ({len(diff.faster)}):",
                      [f"{t.label}: median {_fmt_seconds(t.base_median)} -> {_fmt_seconds(t.head_median)} "
                       f"(x{t.ratio:.2f}, p={t.p_value:.3g})" for t in diff.faster], 10)
    lines += _listing(f"other outcome changes ({len(diff.changed)}):",
                      [f"{c.label}: {c.base_outcome} -> {c.head_outcome}" for c in diff.changed], 10)
    if diff.added:
        lines.append(f"new in the candidate: {len(diff.added)} item(s)")
    return lines


def _result(diff: RunDiff, problems: list[str], incomplete: str | None) -> tuple[int, str]:
    """The gate's exit status and its RESULT line."""
    caveat = "; against an incomplete baseline (--allow-incomplete-baseline)" if incomplete else ""
    if diff.regressed or diff.slower:
        parts = []
        if diff.regressed:
            parts.append(f"{len(diff.regressed)} regressed item(s)")
        if diff.slower:
            parts.append(f"{len(diff.slower)} slower benchmark(s)")
        return 1, f"RESULT: FAIL ({', '.join(parts)}{caveat})"
    if problems:
        return 2, f"RESULT: NOT COMPARABLE (nothing regressed among the items that could be compared{caveat})"
    return 0, f"RESULT: PASS (nothing regressed{caveat})"


def markdown(text: str, title: str = "Conformance gate") -> str:
    """``text`` as a Markdown section in a code fence longer than any backtick run in it, so that
    no message, id or label from a results file can close the fence and be read as Markdown; its
    control characters escaped (:func:`~conformance.core.text.safe_to_show`)."""
    text, title = safe_to_show(text), safe_to_show(title)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"### {title}\n\n{fence}text\n{text}\n{fence}\n"


def scope_from_files(files: Iterable[str], paths_map: str | None = None, root: str = "."):
    """(ops or None for everything, a one-line note) for changed files."""
    from conformance.results.selection import load_rules, select_ops  # lazy: yaml (~35 ms); cli imports this module

    selection = select_ops(files, load_rules(paths_map), root)
    if selection.everything:
        return None, f"every op ({len(selection.files)} changed files include shared code)"
    if not selection.ops:
        return set(), f"no op ({len(selection.files)} changed files select none)"
    shown = ", ".join(f for f, ops in selection.reasons.items() if ops)[:300]
    return set(selection.ops), f"ops {', '.join(sorted(selection.ops))} (selected by {shown})"
