"""pytest's rewritten modules keep their bytecode where PYTHONDONTWRITEBYTECODE is set
(conformance/run/rewrite_cache.py), and the runs check and replay start rewrite nothing."""

from __future__ import annotations

import importlib
import sys
import tomllib
from pathlib import Path

from conformance.core.target import CandidateTarget
from conformance.entry_points import check
from conformance.run import rewrite_cache

REPO = Path(__file__).resolve().parents[1]


def test_the_harness_tests_load_the_cache_switch_before_the_entry_point_plugins():
    addopts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert "-p conformance.run.rewrite_cache" in addopts


def test_importing_it_turns_bytecode_writing_on(monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    importlib.reload(rewrite_cache)
    assert sys.dont_write_bytecode is False


def test_this_process_loaded_the_plugin_rewritten_with_its_bytecode_cached():
    """The plugin module was rewritten by pytest (its loader is the rewriting hook) and its rewritten
    bytecode is on disk: the cache a second process reads instead of rewriting."""
    plugin = sys.modules["conformance.run.generated_plugin"]
    if type(plugin.__loader__).__name__ != "AssertionRewritingHook":
        raise AssertionError(f"the plugin was loaded by {plugin.__loader__!r}, not pytest's rewriting hook")
    source = Path(plugin.__file__)
    cached = list((source.parent / "__pycache__").glob(f"{source.stem}.*-pytest-*.pyc"))
    assert cached, f"no rewritten bytecode of {source.name} in {source.parent / '__pycache__'}"
    # pytest's header: magic, flags, then the source's mtime and size it was rewritten from
    header = cached[0].read_bytes()[:16]
    stat = source.stat()
    assert int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
    assert int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF


def test_the_pytest_check_starts_rewrites_no_assert(tmp_path):
    command = check.pytest_command([CandidateTarget.parse("adagrad=torch.optim:Adagrad")],
                                   results=tmp_path / "candidate.json")
    assert "--assert=plain" in command and command[command.index("-o") + 1] == "addopts="
