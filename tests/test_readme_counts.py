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


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest"
errors="0" failures="1" skipped="2" tests="10" time="1.0"></testsuite></testsuites>"""


@pytest.mark.parametrize("tier", ["fast", "slow", "acceptance"])
def test_the_readme_claims_each_tiers_counts(tier):
    claim = readme_counts.tier_claimed((REPO / "README.md").read_text(encoding="utf-8"), tier)
    assert claim["tests"] > 0


def test_a_tier_count_that_differs_is_named_and_one_that_matches_is_not():
    assert readme_counts.tier_counted(JUNIT) == {"tests": 10}
    assert readme_counts.tier_differences("the fast tier (10 tests: 7 passed, 2 skipped)", "fast", JUNIT) == []
    assert readme_counts.tier_differences("the fast tier (9 tests)", "fast", JUNIT) == [
        "the fast tier's tests: the README says 9, the run has 10"]
    with pytest.raises(ValueError, match="no counts of the slow tier"):
        readme_counts.tier_claimed("the fast tier (10 tests)", "slow")


def test_the_command_line_fails_on_a_stale_tier_count_and_names_it(tmp_path, capsys):
    main_job = "1 items, 1 passed, 0 xfailed, 0 unsupported, 0 failed"
    (tmp_path / "results.json").write_text('{"records": [{"outcome": "passed"}]}')
    (tmp_path / "README.md").write_text(f"{main_job}; the fast tier (9 tests)")
    (tmp_path / "fast.xml").write_text(JUNIT)
    argv = [str(tmp_path / "results.json"), str(tmp_path / "README.md"), "--tier", f"fast={tmp_path / 'fast.xml'}"]
    assert readme_counts.main(argv) == 1
    assert "the fast tier's tests: the README says 9, the run has 10" in capsys.readouterr().err
    (tmp_path / "README.md").write_text(f"{main_job}; the fast tier (10 tests)")
    assert readme_counts.main(argv) == 0
