"""What a run prints: a clean selection under pytest-xdist, run as the README's main job is (from
outside the sources, so that ``conformance`` is the installed one: with ``pip install -e`` that is
setuptools' editable finder), ends with no warnings summary. The suite's plugin modules carry
PYTEST_DONT_REWRITE: without it pytest warned "Module already imported so cannot be rewritten" for
four of them, in each process (12 warnings in the main job). Triton's interpreter warnings are
tests/test_kernels.py's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a child pytest with its own xdist workers

REPO = Path(__file__).resolve().parents[1]


def test_a_passing_run_under_xdist_prints_no_warnings(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "specs"), "-p", "no:cacheprovider", "-n", "2", "-q",
         "--conformance-device", "cpu", "--conformance-examples", "0", "-k", "coalesce and dense and float64",
         "--conformance-results", str(tmp_path / "results.json")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "warnings summary" not in output and "Warning" not in output, output[-3000:]
