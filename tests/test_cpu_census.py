"""``--cpu-seconds`` (conftest.py) and tests/cpu_census.py: each test's CPU, its child processes' included,
in the JUnit XML of a run under xdist, and the census CI prints from it."""

from __future__ import annotations

from pathlib import Path

import pytest

import cpu_census
from conformance_runs import REPO

BUSY_AND_IDLE = """
    import subprocess
    import sys
    import time

    def test_busy_in_a_child_process():
        # half a second of CPU, spent by a child process this test waits for
        subprocess.run([sys.executable, "-c",
                        "import time\\nend = time.process_time() + 0.5\\nwhile time.process_time() < end: pass"],
                       check=True)

    def test_idle():
        time.sleep(0.5)  # wall time, no CPU
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest((REPO / "conftest.py").read_text(encoding="utf-8"))
    pytester.makepyfile(test_costs=BUSY_AND_IDLE)
    return pytester


def test_each_tests_cpu_seconds_reach_the_junit_xml_from_an_xdist_worker_children_included(project, capsys):
    junit = project.path / "junit.xml"
    result = project.runpytest("-n", "1", "-p", "no:cacheprovider", "--cpu-seconds", f"--junitxml={junit}")
    result.assert_outcomes(passed=2)
    found = {cost.test.rpartition("::")[2]: cost for cost in cpu_census.costs(junit)}
    assert set(found) == {"test_busy_in_a_child_process", "test_idle"}, found
    busy, idle = found["test_busy_in_a_child_process"], found["test_idle"]
    assert busy.cpu >= 0.45, busy  # the child's 0.5 s, counted in the test that waited for it
    assert idle.wall >= 0.5 and idle.cpu < 0.25, idle  # its wall time is no cost to the cores
    assert cpu_census.main([str(junit), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert f"{junit}: 2 tests" in out and "the 1 that cost the most" in out
    assert out.strip().splitlines()[-1].endswith("test_costs.py::test_busy_in_a_child_process"), out


def test_a_run_without_the_option_has_no_property_and_the_census_says_how_to_get_one(project, capsys):
    junit = project.path / "junit.xml"
    project.runpytest("-p", "no:xdist", "-p", "no:cacheprovider", f"--junitxml={junit}").assert_outcomes(passed=2)
    assert cpu_census.costs(junit) == []
    assert cpu_census.main([str(junit)]) == 1
    assert "no test has a cpu_seconds property (run pytest with --cpu-seconds)" in capsys.readouterr().err


def test_a_file_that_is_not_junit_xml_is_named_and_the_others_are_still_ranked(tmp_path: Path, capsys):
    broken, good = tmp_path / "tier-slow.xml", tmp_path / "tier-fast.xml"
    broken.write_text("<testsuites><testcase")
    good.write_text('<testsuites><testsuite><testcase classname="tests.test_a" name="test_b" time="2.0">'
                    '<properties><property name="cpu_seconds" value="1.50"/></properties></testcase>'
                    '</testsuite></testsuites>')
    assert cpu_census.main([str(broken), str(good)]) == 2
    captured = capsys.readouterr()
    assert f"cpu_census: {broken}: not readable as JUnit XML" in captured.err
    assert f"{good}: 1 tests, 2 CPU-seconds" in captured.out and "tests/test_a.py::test_b" in captured.out
