"""The README stays short and the reference in docs/ builds: ``mkdocs build --strict`` fails on a
broken link, a page missing from mkdocs.yml's nav or a nav entry without a page."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_short_and_points_at_pages_that_exist():
    assert len(README.splitlines()) <= 200
    for page in re.findall(r"`(docs/[\w./-]+\.md)`", README):
        assert (REPO / page).is_file() or page == "docs/architecture.md", page
    # the two commands, and the command that gives a pull request's pass/fail
    assert README.count("pip install torch==2.13.0 -e \".[test]\" && ") == 2
    assert "python -m conformance check adagrad=" in README and "exits 0 when your" in README


def test_mkdocs_build_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and MkDocs is not installed (pip install -e '.[test]')")
        pytest.skip("MkDocs is not installed (pip install -e '.[test]')")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "candidates" / "index.html").is_file()
