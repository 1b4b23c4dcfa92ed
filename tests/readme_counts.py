"""The README's counts of the main job, checked against a run of it: ``python tests/readme_counts.py
reports/results.json [README.md]`` exits 1 naming each count that differs (CI runs it after the main
job, so the README's claim cannot go stale). The claim reads ``N items, P passed, X xfailed, U
unsupported, F failed`` in one sentence (the README's "Measured" paragraph); a README without it is an
error too."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

CLAIM = re.compile(r"(?P<items>[\d,]+)\s+items,\s+(?P<passed>[\d,]+)\s+passed,\s+(?P<xfail>[\d,]+)\s+xfailed,\s+"
                   r"(?P<unsupported>[\d,]+)\s+unsupported,\s+(?P<failed>[\d,]+)\s+failed")


def claimed(readme: str) -> dict[str, int]:
    """The counts the README claims for the main job; ValueError where it claims none."""
    match = CLAIM.search(readme)
    if match is None:
        raise ValueError("the README claims no main-job counts ('N items, P passed, X xfailed, U unsupported, "
                         "F failed')")
    return {key: int(value.replace(",", "")) for key, value in match.groupdict().items()}


def counted(results: dict) -> dict[str, int]:
    """The same counts of a results document: its records by outcome (failed counts error too)."""
    outcomes = Counter(record["outcome"] for record in results["records"])
    return {"items": sum(outcomes.values()), "passed": outcomes["passed"], "xfail": outcomes["xfail"],
            "unsupported": outcomes["unsupported"], "failed": outcomes["failed"] + outcomes["error"]}


def differences(readme: str, results: dict) -> list[str]:
    want, got = claimed(readme), counted(results)
    return [f"{key}: the README says {want[key]:,}, the run has {got[key]:,}" for key in want if want[key] != got[key]]


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    readme = Path(argv[1] if len(argv) == 2 else Path(__file__).resolve().parents[1] / "README.md")
    try:
        problems = differences(readme.read_text(encoding="utf-8"), json.loads(Path(argv[0]).read_text()))
    except (OSError, ValueError, KeyError) as exc:
        print(f"readme_counts: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"readme_counts: {problem} (update README.md's main-job counts)", file=sys.stderr)
    if not problems:
        print("readme_counts: the README's main-job counts are the run's")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
