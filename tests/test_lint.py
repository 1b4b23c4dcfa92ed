"""ruff over the package (pyproject.toml's [tool.ruff]: pyflakes and pycodestyle's errors): a new
error fails the fast tier, so CI fails on it. mypy over the package (pyproject.toml's [tool.mypy]): a
new error fails the slow tier and CI's typecheck stage before it (.ci/run); a cold run, its cache
empty, takes half a minute (docs/running.md#lint-and-types)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_package():
    """``python -m mypy`` as CI runs it: the files and settings of pyproject.toml's [tool.mypy], the
    repository's .mypy_cache (warm after CI's typecheck stage)."""
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "Success: no issues found" in result.stdout, (
        result.stdout[-4000:] + result.stderr[-2000:])


@pytest.mark.slow
def test_mypy_would_fail_what_the_config_asks_for(tmp_path):
    """The project's config is the one read: the body of an unannotated function is checked
    (check_untyped_defs; mypy's default skips it) and an ignore that silences nothing is an error
    (warn_unused_ignores)."""
    (tmp_path / "bad.py").write_text('def f():\n    x: int = "not an int"\n    return x\n\n\n'
                                     'y = 1  # type: ignore[assignment]\n')
    result = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                             "--cache-dir", str(tmp_path / "cache"), str(tmp_path / "bad.py")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "bad.py:2: error" in result.stdout and "[assignment]" in result.stdout, result.stdout
    assert "bad.py:6: error" in result.stdout and "[unused-ignore]" in result.stdout, result.stdout
