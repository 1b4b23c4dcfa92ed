"""The README's counts, checked against the runs CI makes: ``python tests/readme_counts.py
reports/results.json [README.md] [--tier NAME=JUNIT.xml ...]`` exits 1 naming each count that differs
(CI runs it after the main job, so the README's claims cannot go stale).

* The main job's claim reads ``N items, P passed, X xfailed, U unsupported, F failed`` in one sentence
  (the README's "Measured" paragraph), checked against the results file.
* Each tier given with ``--tier`` (its pytest run's ``--junitxml``) is claimed as ``the NAME tier (N
  tests``: the tests it ran (passed, skipped or not; a failed one fails CI before this check).

A README without a claim it is checked for is an error too."""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

CLAIM = re.compile(r"(?P<items>[\d,]+)\s+items,\s+(?P<passed>[\d,]+)\s+passed,\s+(?P<xfail>[\d,]+)\s+xfailed,\s+"
                   r"(?P<unsupported>[\d,]+)\s+unsupported,\s+(?P<failed>[\d,]+)\s+failed")
TIER_CLAIM = r"the\s+{name}\s+tier\s+\((?P<tests>[\d,]+)\s+tests"


def _number(text: str | None) -> int:
    return int(text.replace(",", "")) if text else 0


def claimed(readme: str) -> dict[str, int]:
    """The counts the README claims for the main job; ValueError where it claims none."""
    match = CLAIM.search(readme)
    if match is None:
        raise ValueError("the README claims no main-job counts ('N items, P passed, X xfailed, U unsupported, "
                         "F failed')")
    return {key: _number(value) for key, value in match.groupdict().items()}


def counted(results: dict) -> dict[str, int]:
    """The same counts of a results document: its records by outcome (failed counts error too)."""
    outcomes = Counter(record["outcome"] for record in results["records"])
    return {"items": sum(outcomes.values()), "passed": outcomes["passed"], "xfail": outcomes["xfail"],
            "unsupported": outcomes["unsupported"], "failed": outcomes["failed"] + outcomes["error"]}


def differences(readme: str, results: dict) -> list[str]:
    want, got = claimed(readme), counted(results)
    return [f"{key}: the README says {want[key]:,}, the run has {got[key]:,}" for key in want if want[key] != got[key]]


def tier_claimed(readme: str, name: str) -> dict[str, int]:
    """The number of tests the README claims for tier ``name``; ValueError where it claims none."""
    match = re.search(TIER_CLAIM.format(name=re.escape(name)), readme)
    if match is None:
        raise ValueError(f"the README claims no counts of the {name} tier ('the {name} tier (N tests')")
    return {key: _number(value) for key, value in match.groupdict().items()}


def tier_counted(junit: str) -> dict[str, int]:
    """The tests a pytest ``--junitxml`` document reports (its test suites summed)."""
    root = ElementTree.fromstring(junit)
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    return {"tests": sum(int(suite.get("tests", 0)) for suite in suites)}


def tier_differences(readme: str, name: str, junit: str) -> list[str]:
    want, got = tier_claimed(readme, name), tier_counted(junit)
    return [f"the {name} tier's {key}: the README says {want[key]:,}, the run has {got[key]:,}"
            for key in want if want[key] != got[key]]


def _tier(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=JUNIT.xml, got {text!r}")
    return name, Path(path)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="readme_counts.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="the main job's results file (reports/results.json)")
    parser.add_argument("readme", type=Path, nargs="?", default=Path(__file__).resolve().parents[1] / "README.md")
    parser.add_argument("--tier", type=_tier, action="append", default=[], metavar="NAME=JUNIT.xml",
                        help="a tier's pytest --junitxml, checked against the README's 'the NAME tier (...' claim")
    args = parser.parse_args(argv)
    try:
        readme = args.readme.read_text(encoding="utf-8")
        problems = differences(readme, json.loads(args.results.read_text()))
        for name, junit in args.tier:
            problems += tier_differences(readme, name, junit.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, ElementTree.ParseError) as exc:
        print(f"readme_counts: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"readme_counts: {problem} (update README.md's counts)", file=sys.stderr)
    if not problems:
        print("readme_counts: the README's counts are the runs'")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
