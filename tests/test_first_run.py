"""A fresh machine's first run: the C++ kernels' build (15-20 s, once per machine) is waited for before a
kernel item's timer starts, never charged to its timeout (reliability round five, F4; issue 49)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_cold_kernel_build_is_not_charged_to_the_items_timeout(tmp_path):
    """An empty build folder and a 5 s item timeout, far below the build's time: the stock kernel's items
    pass (before, both were errors: 'Timeout (>5.0s) from pytest-timeout')."""
    build = tmp_path / "kernels-build"
    env = {**os.environ, "CONFORMANCE_KERNELS_BUILD_DIR": str(build), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", "-q", "-n", "0", "-k", "basic-2x3",
         "--conformance-backend", "kernel", "--conformance-timeout", "5"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 passed" in proc.stdout and "error" not in proc.stdout.splitlines()[-1], proc.stdout[-2000:]
    assert any(build.rglob("*.so")), f"nothing was built in {build}: the test did not start cold"
