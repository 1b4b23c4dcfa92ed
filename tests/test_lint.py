"""ruff over the package (pyproject.toml's [tool.ruff]: pyflakes and pycodestyle's errors): a new
error fails the fast tier, so CI fails on it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing_in_the_package():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "conformance"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_ruff_would_fail_an_undefined_name(tmp_path):
    (tmp_path / "bad.py").write_text("def f():\n    return undefined_name\n")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                             str(REPO / "pyproject.toml"), str(tmp_path / "bad.py")], capture_output=True, text=True)
    assert result.returncode == 1 and "F821" in result.stdout, result.stdout + result.stderr
