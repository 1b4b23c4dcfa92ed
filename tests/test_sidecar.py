"""The sidecar of a run in one process (conformance/run/sidecar.py), run as the run starts it
(``python -I <its file> <results file>``): when its stdin closes with an item armed, it adds that
item's record, and the run's records since its last write, through the results store's atomic
writer; it leaves the file alone when nothing was armed or the run completed; it imports no torch.
The runs that end in a hang or a crash are in tests/test_hangs.py (slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conformance.results.store import load_results
from conformance.run import sidecar
from test_results_files import document, record


def _results(path: Path, status: str = "running") -> bytes:
    path.write_text(json.dumps(document([record("a")], status=status, not_run=[])))
    return path.read_bytes()


def _tell(path: Path, *lines: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-X", "importtime", sidecar.__file__, str(path)], text=True,
                          input="".join(line + "\n" for line in lines), capture_output=True, timeout=60)


def _arm(case: str, hung_after: float) -> str:
    crashed = record(case, "error", crashed=True, message="the process ended while running this item")
    return "arm " + json.dumps({"record": crashed, "hung": "timed out in native code", "hung_after": hung_after})


def test_the_armed_item_is_added_when_the_run_ends_in_it(tmp_path):
    path = tmp_path / "results.json"
    _results(path)
    expected = [record(case)["nodeid"] for case in "abcd"]
    proc = _tell(path, "expect " + json.dumps(expected), "done " + json.dumps(record("b")), _arm("c", 1e18))
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in proc.stderr.splitlines()}
    assert "conformance" in imported and "torch" not in imported and "pytest" not in imported
    results = load_results(path)  # strict JSON, and the schema
    assert [r["case"] for r in results.records] == ["a", "b", "c"]
    assert results.records[2]["message"] == "the process ended while running this item"
    assert "timed_out" not in results.records[2]
    assert results.run["status"] == "interrupted" and results.run["not_run"] == expected[3:]
    assert results.run["records_expected"] == 4 and results.run["finished"] == results.run["updated"]
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left


def test_past_its_deadline_the_armed_item_is_a_native_hang(tmp_path):
    path = tmp_path / "results.json"
    _results(path)
    assert _tell(path, _arm("c", 0)).returncode == 0
    hung = load_results(path).records[-1]
    assert hung["timed_out"] is True and hung["message"] == "timed out in native code"


def test_nothing_armed_or_a_complete_run_leaves_the_file_alone(tmp_path):
    path = tmp_path / "results.json"
    before = _results(path)
    assert _tell(path, _arm("c", 1e18), "disarm").returncode == 0
    assert path.read_bytes() == before
    before = _results(path, status="complete")
    assert _tell(path, _arm("c", 1e18)).returncode == 0
    assert path.read_bytes() == before
