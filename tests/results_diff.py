"""Diff two results files record by record: ``python tests/results_diff.py BEFORE AFTER``.

Records pair up by node id; a record is unchanged when its outcome, verdict and message are the
same. Prints added, deleted and changed ids (with the fields that changed) and exits 1 when there
is any. Timings, re-run commands and run metadata are not compared."""

from __future__ import annotations

import json
import sys

COMPARED = ("outcome", "verdict", "message")


def records(path: str) -> dict[str, dict]:
    with open(path, encoding="utf-8") as handle:
        return {record["nodeid"]: record for record in json.load(handle)["records"]}


def diff(before: dict[str, dict], after: dict[str, dict]) -> dict[str, list]:
    changed = []
    for nodeid in sorted(before.keys() & after.keys()):
        fields = [name for name in COMPARED if before[nodeid].get(name) != after[nodeid].get(name)]
        if fields:
            changed.append((nodeid, {name: (before[nodeid].get(name), after[nodeid].get(name)) for name in fields}))
    return {"added": sorted(after.keys() - before.keys()), "deleted": sorted(before.keys() - after.keys()),
            "changed": changed}


def main(argv: list[str]) -> int:
    before, after = records(argv[0]), records(argv[1])
    found = diff(before, after)
    for kind, entries in found.items():
        for entry in entries:
            print(kind, *(entry if isinstance(entry, tuple) else (entry,)))
    print(f"{len(before)} before, {len(after)} after: " + ", ".join(f"{len(v)} {k}" for k, v in found.items()))
    return 1 if any(found.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
