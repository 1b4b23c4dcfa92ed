"""The Matrix section: one table per spec file (generated properties: one per op), a row per case, a
column per implementation (backend) and device that ran something in that table; in a cell one line
per run (with two or more runs) and a chip per dtype, coloured by outcome, its tooltip the item's
outcome and, for an unsupported or skipped item, why."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from conformance.core.types import Outcome
from conformance.results.report.common import (DEVICE_ORDER, DTYPE_SHORT, TOOLTIP_LIMIT, backend_order, capped,
                                               order, run_tag)
from conformance.results.report.items import case_context, entry
from conformance.results.store import Results, item_key


def group_of(record: dict) -> str:
    """The matrix table a record's row is in: its spec file; generated items one table per op."""
    if record.get("spec") == "generated" and record.get("op"):
        return f"generated · {record['op']}"
    return record["spec"]


def collect(runs: list[Results]) -> tuple[list[dict], dict, dict, dict]:
    """Every run's items (what the page shows of each), each item's index by (run, key), the matrix's
    rows by (group, spec, kind, case) with their cells' items by (backend, device), and the cases' context."""
    items: list[dict[str, Any]] = []
    item_index: dict[tuple[int, tuple], int] = {}
    rows: dict[tuple[str, str, str, str], dict] = {}
    cases: dict[str, dict] = {}
    for r_index, results in enumerate(runs):
        for key, context in (results.cases or {}).items():
            if key not in cases and isinstance(context, dict):
                cases[capped(key)] = case_context(capped(context))
        for original in results.records:
            item_index[(r_index, item_key(original))] = len(items)
            record = capped(original)  # what the page shows of it
            items.append(entry(record, results, r_index))
            row = _row_of(rows, record, cases)
            row["cells"][(record.get("backend") or "-", record.get("device") or "-")].append(len(items) - 1)
    return items, item_index, rows, cases


def _row_of(rows: dict, record: dict, cases: dict) -> dict:
    """The record's row (made on its first record)."""
    kind, case = record.get("kind") or "case", record.get("case") or "(invalid spec)"
    row_key = (group_of(record), record["spec"], kind, case)
    if row_key not in rows:
        case_key = f"{record['spec']}::{case}"  # not `title`: that is the page's heading
        context = cases.get(case_key)
        line = context.get("line") if isinstance(context, dict) else None
        rows[row_key] = {"group": row_key[0], "spec": record["spec"], "kind": kind, "case": case,
                         "op": record.get("op"), "cells": defaultdict(list),
                         "title": case_key + (f" (line {line})" if line else "")}
    return rows[row_key]


def _hidden_columns(column_items: dict, items: list[dict]) -> list[dict]:
    """Columns where every item was skipped (a device this machine lacks): named, not drawn."""
    hidden = []
    for column, indices in column_items.items():
        if all(items[i]["outcome"] == Outcome.SKIPPED for i in indices):
            reasons = sorted({(items[i]["message"] or "").removeprefix("Skipped: ") for i in indices})
            hidden.append({"backend": column[0], "device": column[1], "count": len(indices),
                           "reason": "; ".join(r for r in reasons if r)[:300]})
    return hidden


def matrix(runs: list[Results], labels: list[str], items: list[dict], rows: dict) -> dict[str, Any]:
    """Groups (one table each) with only the columns that ran something in them; columns skipped
    everywhere are named instead of drawn."""
    column_items: dict[tuple[str, str], list[int]] = defaultdict(list)
    for row in rows.values():
        for column, indices in row["cells"].items():
            column_items[column].extend(indices)
    runs_in_column = {c: {items[i]["run"] for i in v} for c, v in column_items.items()}
    backends = backend_order(runs)
    grouped: dict[str, list[dict]] = defaultdict(list)
    for row in rows.values():
        grouped[row["group"]].append(row)
    groups = []
    for name, group_rows in grouped.items():
        ran = {c for row in group_rows for c, indices in row["cells"].items()
               if any(items[i]["outcome"] != Outcome.SKIPPED for i in indices)}
        columns = sorted(ran, key=lambda c: (order(c[0], backends), order(c[1], DEVICE_ORDER)))
        group_rows.sort(key=lambda r: (r["kind"] == "benchmark",))
        table = Table(columns, len(runs), labels, items, runs_in_column)
        groups.append({"name": name, "op": next((r["op"] for r in group_rows if r["op"]), None),
                       "columns": [{"backend": c[0], "device": c[1]} for c in columns],
                       "header_backends": spans([c[0] for c in columns]),
                       "rows": [table.row(row) for row in group_rows]})
    return {"groups": groups, "hidden_columns": _hidden_columns(column_items, items), "multi_run": len(runs) > 1}


class Table:
    """One group's table: its columns, and what a row of it shows."""

    def __init__(self, columns: list[tuple], run_count: int, labels: list[str], items: list[dict],
                 runs_in_column: dict):
        self.columns, self.run_count, self.labels, self.items = columns, run_count, labels, items
        self.runs_in_column = runs_in_column

    def chip(self, i: int, column: tuple) -> dict[str, Any]:
        """One item's chip: its dtype, outcome and a tooltip that says why an unsupported item did not run."""
        it = self.items[i]
        title = (f"{self.labels[it['run']]} · {column[0]} · {column[1]} · {it['dtype']}: {it['outcome']}"
                 + (f" ({it['verdict']})" if it["verdict"] else ""))
        why = it["reason"] or (it["divergence"] or {}).get("reason")
        if why:
            title += " — " + capped(why, TOOLTIP_LIMIT)
        return {"i": i, "outcome": it["outcome"], "text": DTYPE_SHORT.get(it["dtype"], it["dtype"] or "·"),
                "title": title}

    def cell(self, row: dict, column: tuple) -> dict[str, Any]:
        """One column of a row: one line per run that has something there, a chip per dtype."""
        multi_run = self.run_count > 1
        lines = []
        for r_index in range(self.run_count):
            chips = sorted((i for i in row["cells"].get(column, []) if self.items[i]["run"] == r_index),
                           key=lambda i: order(self.items[i]["dtype"], tuple(DTYPE_SHORT)))
            if not chips and (not multi_run or r_index not in self.runs_in_column[column]):
                continue  # a run that has nothing in this column (a baseline without the candidate)
            lines.append({"run": r_index, "tag": run_tag(r_index), "label": self.labels[r_index],
                          "chips": [self.chip(i, column) for i in chips]})
        if not any(line["chips"] for line in lines):
            lines = []
        return {"backend": column[0], "device": column[1], "lines": lines}

    def row(self, row: dict) -> dict[str, Any]:
        """One spec/case row: per column one line per run, a chip per dtype."""
        items = self.items
        outcomes_by_item = defaultdict(set)
        for column, indices in row["cells"].items():
            for i in indices:
                outcomes_by_item[(column, items[i]["dtype"])].add((items[i]["run"], items[i]["outcome"]))
        differs = self.run_count > 1 and any(len({o for _, o in v}) > 1 or len(v) < self.run_count
                                             for v in outcomes_by_item.values())
        row_outcomes = {items[i]["outcome"] for indices in row["cells"].values() for i in indices}
        # xfails and xpasses are worth a look: only rows of passes, skips and unsupported ones count as clean
        all_pass = row_outcomes <= {Outcome.PASSED, Outcome.SKIPPED, Outcome.UNSUPPORTED}
        return {"case": row["case"], "kind": row["kind"], "op": row["op"] or "",
                "cells": [self.cell(row, column) for column in self.columns], "differs": differs,
                "all_pass": all_pass, "outcomes": " ".join(sorted(row_outcomes)),
                "search": f"{row['spec']} {row['case']} {row['op'] or ''}", "title": row["title"]}


def spans(values: list) -> list[dict[str, Any]]:
    """Consecutive equal values as (value, colspan) for header rows."""
    found: list[dict[str, Any]] = []
    for value in values:
        if found and found[-1]["value"] == value:
            found[-1]["span"] += 1
        else:
            found.append({"value": value, "span": 1})
    return found
