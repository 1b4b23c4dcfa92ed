"""The README's main-job counts are checked against the main job's results (tests/readme_counts.py, run by
.ci/run after the main job): the claim is found, and a count that differs is named."""

from __future__ import annotations

import pytest

import readme_counts
from conformance_runs import REPO


def _results(**outcomes: int) -> dict:
    return {"records": [{"outcome": outcome} for outcome, n in outcomes.items() for _ in range(n)]}


def test_the_readme_claims_the_main_jobs_counts():
    claim = readme_counts.claimed((REPO / "README.md").read_text(encoding="utf-8"))
    assert claim["items"] == claim["passed"] + claim["xfail"] + claim["unsupported"] + claim["failed"]
    assert claim["failed"] == 0


def test_a_count_that_differs_is_named_and_one_that_matches_is_not():
    readme = "it took 1 s (5 items, 3 passed, 1 xfailed,\n1 unsupported, 0 failed) on the VM"
    assert readme_counts.differences(readme, _results(passed=3, xfail=1, unsupported=1)) == []
    assert readme_counts.differences(readme, _results(passed=2, xfail=1, unsupported=1, error=1)) == [
        "passed: the README says 3, the run has 2", "failed: the README says 0, the run has 1"]
    with pytest.raises(ValueError, match="claims no main-job counts"):
        readme_counts.claimed("no counts here")
