"""What a PASS covered, per op (issue 50): the configurations the op's covering array ran (every pair of its
settings), the combinations torch refuses (judged by rejects-invalid, never run as configurations), and each
generated property of one backend -- ran, or unsupported with its reason (a candidate's declaration, a
refusal in its own words). Shown under check's verdict and in the report."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from conformance.core.record import ItemRecord
from conformance.ops import OPS
from conformance.ops.optimizers.configurations import covering_rows, declares_space, uncoverable, valid_rows

RAN = ("passed", "failed", "error", "xfail", "xpass")


def configuration_counts(op_name: str) -> dict[str, int] | None:
    """The op's configuration space in numbers (None: it declares none): explicit configurations run, the
    configurations torch runs, the combinations of settings torch refuses."""
    op = OPS.get(op_name)
    if op is None or not declares_space(op):
        return None
    return {"explicit": len(covering_rows(op)), "valid": len(valid_rows(op)), "refused": len(uncoverable(op))}


def coverage_map(records: Iterable[ItemRecord], backend: str) -> dict[str, dict]:
    """op -> {"configurations": configuration_counts, "ran": [property...], "unsupported": {property: reason}}
    for ``backend``'s generated items (a property ran where any of its items ran)."""
    ran: dict[str, set[str]] = defaultdict(set)
    unsupported: dict[str, dict[str, str]] = defaultdict(dict)
    for record in records:
        op = record.get("op")
        if record.get("backend") != backend or not record.get("generated") or not op:
            continue
        prop = (record.get("case") or "").removeprefix(f"{op}-")
        if record.get("outcome") in RAN:
            ran[op].add(prop)
        elif record.get("outcome") == "unsupported":
            unsupported[op].setdefault(prop, (record.get("message") or "").removeprefix("unsupported: ").split("\n")[0])
    return {op: {"configurations": configuration_counts(op), "ran": sorted(ran[op]),
                 "unsupported": {p: why for p, why in sorted(unsupported[op].items()) if p not in ran[op]}}
            for op in sorted(set(ran) | set(unsupported))}


def coverage_lines(records: Iterable[ItemRecord], backend: str) -> list[str]:
    """The map as check prints it under its verdict."""
    lines = []
    for op, entry in coverage_map(records, backend).items():
        counts = entry["configurations"]
        configured = (f"; configurations: {counts['explicit']} explicit covering every pair of settings of the "
                      f"{counts['valid']} torch runs, {counts['refused']} combinations torch refuses (judged by "
                      "rejects-invalid)") if counts else ""
        lines.append(f"  covered: {op}: {len(entry['ran'])} properties ran{configured}")
        lines += [f"    unsupported: {prop}: {why[:160]}" for prop, why in entry["unsupported"].items()]
    return lines


def coverage_rows(records: list[ItemRecord], backends: Iterable[str]) -> list[dict]:
    """The report's Coverage table: a row per op and backend, in ``backends``' order, for the candidate and
    for any backend with a property unsupported (what a PASS did not cover), each with its op's
    configurations."""
    rows = []
    for backend in backends:
        for op, entry in coverage_map(records, backend).items():
            if backend == "candidate" or entry["unsupported"]:
                rows.append({"op": op, "backend": backend, **entry})
    return sorted(rows, key=lambda row: row["op"])
