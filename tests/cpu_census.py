"""Where a tier's CPU went, test by test: ``python tests/cpu_census.py JUNIT.xml ... [--top N]`` reads the
``cpu_seconds`` property each test got from a run with ``--cpu-seconds`` (conftest.py) and prints, per file,
the tests' CPU total and the N tests that cost the most, with their wall time beside it.

CI is CPU-bound on its 2 cores (docs/running.md, "Where CI's CPU goes"): a tier's wall time follows what its
tests cost the cores, not the wall time ``--durations`` ranks them by (a test waiting on a timeout costs the
others nothing). .ci/run prints this for its three tiers after the main job.

Exit status: 0; 1 when a file has no test with the property (the run lacked ``--cpu-seconds``); 2 when a
file cannot be read as JUnit XML (named; the other files are still ranked)."""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import NamedTuple


class Cost(NamedTuple):
    test: str
    cpu: float
    wall: float


def costs(path: Path) -> list[Cost]:
    """Each test case of a JUnit XML file that has a ``cpu_seconds`` property (ParseError, OSError)."""
    found = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        cpu = next((prop.get("value") for prop in case.iter("property") if prop.get("name") == "cpu_seconds"), None)
        if cpu is not None:
            name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            found.append(Cost(name, float(cpu), float(case.get("time") or 0)))
    return found


def census(path: Path, found: list[Cost], top: int) -> list[str]:
    """The lines printed for one file."""
    total = sum(cost.cpu for cost in found)
    lines = [f"{path}: {len(found)} tests, {total:,.0f} CPU-seconds in all (the wall times summed: "
             f"{sum(cost.wall for cost in found):,.0f} s); the {min(top, len(found))} that cost the most:",
             f"  {'CPU s':>7}  {'share':>5}  {'wall s':>6}  test"]
    for cost in sorted(found, key=lambda cost: -cost.cpu)[:top]:
        share = cost.cpu / total if total else 0.0
        lines.append(f"  {cost.cpu:7.1f}  {share:5.0%}  {cost.wall:6.1f}  {cost.test}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("junit", nargs="+", type=Path, help="a JUnit XML file of a run with --cpu-seconds")
    parser.add_argument("--top", type=int, default=15, help="how many tests to list per file (default: %(default)s)")
    args = parser.parse_args(argv)
    status = 0
    for path in args.junit:
        try:
            found = costs(path)
        except (OSError, ElementTree.ParseError) as exc:
            print(f"cpu_census: {path}: not readable as JUnit XML: {exc}", file=sys.stderr)
            status = 2
            continue
        if not found:
            print(f"cpu_census: {path}: no test has a cpu_seconds property (run pytest with --cpu-seconds)",
                  file=sys.stderr)
            status = max(status, 1)
            continue
        print("\n".join(census(path, found, args.top)))
    return status


if __name__ == "__main__":
    sys.exit(main())
