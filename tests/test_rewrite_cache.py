"""pytest's rewritten modules keep their bytecode where PYTHONDONTWRITEBYTECODE is set
(conformance/run/rewrite_cache.py), and the runs check and replay start rewrite nothing."""

from __future__ import annotations

import importlib
import importlib.util
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
    assert pyc_is_current(cached[0].read_bytes()[:16], source), f"{cached[0]} is not {source.name}'s"


def pyc_is_current(header: bytes, source: Path) -> bool:
    """Whether a pyc's 16-byte header (PEP 552) is of ``source`` as it is now, in either form pytest
    writes: up to 9.1 the flags 0 and the source's mtime and size; from 9.2 the flags 3 (a checked hash)
    and the first 8 bytes of ``importlib.util.source_hash`` of the source."""
    flags = int.from_bytes(header[4:8], "little")
    if flags & 1:  # hash-based
        return header[8:16] == importlib.util.source_hash(source.read_bytes())[:8]
    stat = source.stat()
    return (int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)


def test_a_pyc_header_of_either_form_is_read(tmp_path):
    """Both header forms are recognised, and each refuses a header of another source."""
    source = tmp_path / "m.py"
    source.write_text("x = 1\n")
    stat = source.stat()
    magic = importlib.util.MAGIC_NUMBER
    by_time = magic + (0).to_bytes(4, "little") + int(stat.st_mtime).to_bytes(4, "little") \
        + stat.st_size.to_bytes(4, "little")
    by_hash = magic + (3).to_bytes(4, "little") + importlib.util.source_hash(source.read_bytes())[:8]
    assert pyc_is_current(by_time, source) and pyc_is_current(by_hash, source)
    source.write_text("x = 22\n")  # another size and another hash
    assert not pyc_is_current(by_time, source) and not pyc_is_current(by_hash, source)


def test_the_pytest_check_starts_rewrites_no_assert(tmp_path):
    command = check.pytest_command([CandidateTarget.parse("adagrad=torch.optim:Adagrad")],
                                   results=tmp_path / "candidate.json")
    assert "--assert=plain" in command and command[command.index("-o") + 1] == "addopts="
