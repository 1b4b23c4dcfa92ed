"""Reproducers from anywhere (issue 43, item 3): every command a check prints that names a file
candidate names it by absolute path; a counterexample script puts the run's directory first on
sys.path (a candidate that imports a module beside it loads from any directory); each check's
counterexample scripts go with its results (the previous check's move to
``reports/counterexamples/.previous/``). The end-to-end test -- a check from a folder of the user's
own, its replay line and its script run from another directory -- is in the slow tier."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conformance.core.target import CandidateTarget
from conformance.entry_points import check, reproducers, supervise
from conformance_runs import REPO, wrong_adagrad_source

CANDIDATE = "from {helpers} import SquareBeforeSumAdagrad\n\n\nclass MyAdagrad(SquareBeforeSumAdagrad):\n    pass\n"


def _user_folder(folder: Path, helpers: str = "my_helpers") -> str:
    """A user's wrong Adagrad (the README's SquareBeforeSumAdagrad) in ``my_adagrad.py``, which imports
    it from a module beside it; the target as the user writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{helpers}.py").write_text(wrong_adagrad_source(), encoding="utf-8")
    (folder / "my_adagrad.py").write_text(CANDIDATE.format(helpers=helpers), encoding="utf-8")
    return "adagrad=my_adagrad.py:MyAdagrad"


# ------------------------------------------------------------------ the parts, in this process

def test_file_targets_are_made_absolute_and_module_targets_left_alone(tmp_path):
    targets = [CandidateTarget.parse("adagrad=sub/my_adagrad.py:A"), CandidateTarget.parse("coalesce=pkg.mod:f"),
               CandidateTarget.parse("sgd=/abs/file.py:S")]
    made = reproducers.absolute_targets(targets, cwd=tmp_path)
    assert [str(t) for t in made] == [f"adagrad={tmp_path}/sub/my_adagrad.py:A", "coalesce=pkg.mod:f",
                                      "sgd=/abs/file.py:S"]


def test_a_plain_pytest_runs_rerun_lines_name_a_relative_file_candidate_by_its_absolute_path():
    """``pytest specs --conformance-impl adagrad=tests/candidates/mutants.py:...`` (relative, as typed in the
    clone): each record's rerun command names the file by its absolute path, so it runs from anywhere."""
    from conformance_runs import load, run_inprocess

    code, path = run_inprocess("rerun-absolute", "specs/adagrad.yaml", "--conformance-backend", "candidate",
                               "--conformance-impl", "adagrad=tests/candidates/mutants.py:SquareBeforeSumAdagrad",
                               "--conformance-dtype", "float64", "-k", "duplicates-summed-before-squaring")
    (record,) = load(path)["records"]
    assert record["outcome"] == "failed"
    assert f"adagrad={REPO / 'tests' / 'candidates' / 'mutants.py'}:SquareBeforeSumAdagrad" in record["rerun"], \
        record["rerun"]


def test_the_counterexamples_folder_is_the_runs(tmp_path):
    results = tmp_path / "reports" / "candidate.json"
    assert reproducers.counterexamples_folder(results, [], cwd=tmp_path) == tmp_path / "reports" / "counterexamples"
    for extra in (["--conformance-counterexamples", "mine"], ["-x", "--conformance-counterexamples=mine"]):
        assert reproducers.counterexamples_folder(results, extra, cwd=tmp_path) == tmp_path / "mine"


def test_a_checks_scripts_replace_the_previous_ones_in_dot_previous(tmp_path):
    folder = tmp_path / "counterexamples"
    (folder / ".failing").mkdir(parents=True)
    (folder / ".failing" / "item.pickle").write_bytes(b"kept for replay")
    (folder / ".previous").mkdir()
    (folder / ".previous" / "older-check.py").write_text("# two checks ago")
    for name in ("a-candidate-cpu-float32-1.py", "a-candidate-cpu-float32-1.yaml", "b-candidate-cpu-float32-2.notes.txt",
                 "b-candidate-cpu-float32-2.py"):
        (folder / name).write_text("# the previous check's")
    (folder / "README.md").write_text("not ours")
    lines = reproducers.set_aside_counterexamples(folder)
    assert lines == [f"moved the previous counterexample scripts (4 file(s)) to {folder / '.previous'}"]
    assert sorted(p.name for p in (folder / ".previous").iterdir()) == [
        "a-candidate-cpu-float32-1.py", "a-candidate-cpu-float32-1.yaml", "b-candidate-cpu-float32-2.notes.txt",
        "b-candidate-cpu-float32-2.py"]  # the check before it is gone, as reports/.previous/ holds one run
    assert sorted(p.name for p in folder.iterdir()) == [".failing", ".previous", "README.md"]
    assert (folder / ".failing" / "item.pickle").read_bytes() == b"kept for replay"
    # a check that wrote no script: the next one leaves .previous/ empty, as that check's scripts were
    assert reproducers.set_aside_counterexamples(folder) == []
    assert list((folder / ".previous").iterdir()) == []
    assert reproducers.set_aside_counterexamples(tmp_path / "none-yet") == []


def test_a_previous_that_is_a_file_is_an_error_not_a_loss(tmp_path):
    folder = tmp_path / "counterexamples"
    folder.mkdir()
    (folder / ".previous").write_text("a file of the user's")
    (folder / "x-candidate-cpu-float32-1.py").write_text("#")
    with pytest.raises(OSError):
        reproducers.set_aside_counterexamples(folder)
    assert (folder / ".previous").read_text() == "a file of the user's"
    assert (folder / "x-candidate-cpu-float32-1.py").is_file()


def test_check_hands_its_run_the_absolute_path_and_moves_the_previous_scripts(tmp_path, monkeypatch, capsys):
    """pytest stubbed: the command check builds, and what it moved before."""
    from test_results_files import document, record

    user = tmp_path / "user"
    impl = _user_folder(user)
    stale = user / "reports" / "counterexamples"
    stale.mkdir(parents=True)
    (stale / "adagrad-agrees-with-reference-candidate-cpu-float32-0123456789.py").write_text("# an earlier check's")
    monkeypatch.chdir(user)
    monkeypatch.setattr(check, "_probe", lambda *args, **kwargs: None)
    seen: list[list[str]] = []

    def fake_pytest(command):
        seen.append(command)
        run_id = command[command.index("--conformance-run-id") + 1]
        results = Path(command[command.index("--conformance-results") + 1])
        results.write_text(json.dumps(document(
            [record("c", op="adagrad", backend="candidate", nodeid="specs/adagrad.yaml::c[candidate-cpu-float32]")],
            id=run_id, exit_status=0)))
        return 0, None

    monkeypatch.setattr(supervise, "run_pytest", fake_pytest)
    assert check.main([impl, "--examples", "0"]) == check.PASS
    out = capsys.readouterr().out
    command = seen[0]
    assert command[command.index("--conformance-impl") + 1] == f"adagrad={user / 'my_adagrad.py'}:MyAdagrad"
    assert command[command.index("--conformance-label") + 1] == f"candidate {impl}"  # the name as written
    assert f"conformance check: {impl}\n" in out
    assert ("conformance check: moved the previous counterexample scripts (1 file(s)) to "
            "reports/counterexamples/.previous") in out
    assert [p.name for p in (stale / ".previous").iterdir()] == [
        "adagrad-agrees-with-reference-candidate-cpu-float32-0123456789.py"]
    assert not list(stale.glob("*.py"))


def test_replay_commands_in_scripts_name_file_candidates_by_absolute_path(tmp_path, monkeypatch):
    from conformance.cases.counterexamples import _absolute_impl, _absolute_impls

    monkeypatch.chdir(tmp_path)
    line = "python -m conformance replay 'specs::generated::x[candidate-cpu-float32]' --impl adagrad=my.py:A --seed 0"
    assert _absolute_impls(line) == (f"python -m conformance replay 'specs::generated::x[candidate-cpu-float32]' "
                                     f"--impl adagrad={tmp_path}/my.py:A --seed 0")
    module = "python -m conformance replay 'specs::generated::x[candidate-cpu-float32]' --impl adagrad=pkg.m:A"
    assert _absolute_impls(module) == module
    assert _absolute_impl("sub/my.py:A") == f"{tmp_path}/sub/my.py:A" and _absolute_impl("pkg:A") == "pkg:A"
    assert _absolute_impl(None) is None


def test_a_script_puts_the_runs_directory_first_then_the_candidates_folder(tmp_path, monkeypatch):
    """The run's directory first on sys.path, so a candidate that imports a module of the run's
    directory loads wherever the script runs: here it loads (and has no such class), where before it
    could not import its helper."""
    from conformance.cases.reproduce import CANNOT_LOAD, main

    name = uuid.uuid4().hex[:8]  # module names no earlier import left in sys.modules
    root = tmp_path / "run"
    (root / "sub").mkdir(parents=True)
    (root / f"helpers_{name}.py").write_text("VALUE = 1\n", encoding="utf-8")
    (root / "sub" / f"cand_{name}.py").write_text(f"from helpers_{name} import VALUE\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        code = main(property_id="adagrad-agrees-with-reference", backend="candidate", device="cpu", dtype="float32",
                    impl=f"sub/cand_{name}.py:NoSuchClass", example="", root=str(root))
        assert code == CANNOT_LOAD
        assert sys.path[:2] == [str(root), str(root / "sub")]
        assert f"helpers_{name}" in sys.modules  # the helper imported: only the attribute was missing
    finally:
        sys.modules.pop(f"helpers_{name}", None)
        sys.modules.pop(f"conformance_candidate_cand_{name}", None)


# ------------------------------------------------------------------ end to end, across the process boundary

@pytest.mark.slow  # child processes: check, the printed replay commands and a script, from elsewhere
def test_a_checks_reproducers_exit_1_from_another_directory(tmp_path):
    user, elsewhere = tmp_path / "user", tmp_path / "elsewhere"
    impl = _user_folder(user)
    elsewhere.mkdir()
    earlier = user / "reports" / "counterexamples"
    (earlier / ".previous").mkdir(parents=True)
    (earlier / "adagrad-agrees-with-reference-candidate-cpu-float32-0123456789.py").write_text("# an earlier check's")
    (earlier / "adagrad-agrees-with-reference-candidate-cpu-float32-0123456789.yaml").write_text("# its spec")
    (earlier / ".previous" / "older.py").write_text("# two checks ago")
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # the suite importable; the user's folder is not on the path
    proc = subprocess.run([sys.executable, "-m", "conformance", "check", impl, "--examples", "3", "--workers", "2",
                           "--pytest-args", "-k 'float32 and (duplicates-cancel or agrees-with-reference)'"],
                          cwd=user, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == check.FAIL, out[-4000:]
    absolute = f"adagrad={user / 'my_adagrad.py'}:MyAdagrad"
    replays = re.findall(r"^replay: (python -m conformance replay .*)$", proc.stdout, re.MULTILINE)
    assert replays and all(f"--impl {absolute}" in line for line in replays), replays
    assert "--impl adagrad=my_adagrad.py" not in out  # no command names it relative to the user's folder
    assert f"--conformance-impl {absolute}" in out  # check's own printed command line

    # stale scripts of the earlier check were moved aside; this check's scripts are its own
    assert sorted(p.name for p in (earlier / ".previous").iterdir()) == [
        "adagrad-agrees-with-reference-candidate-cpu-float32-0123456789.py",
        "adagrad-agrees-with-reference-candidate-cpu-float32-0123456789.yaml"]
    scripts = sorted(earlier.glob("*.py"))
    assert scripts and all("0123456789" not in p.name for p in scripts), scripts
    assert "moved the previous counterexample scripts (2 file(s))" in out

    def run_from_elsewhere(words: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(words, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)

    script = scripts[0]
    text = script.read_text(encoding="utf-8")
    assert f"impl={str(user / 'my_adagrad.py') + ':MyAdagrad'!r}" in text and f"root={str(user)!r}" in text
    reproduced = run_from_elsewhere([sys.executable, str(script)])
    assert reproduced.returncode == 1, reproduced.stdout[-3000:] + reproduced.stderr[-2000:]
    assert reproduced.stdout.startswith("FAIL adagrad-agrees-with-reference")

    spec_line = next(line for line in replays if "specs/adagrad.yaml::duplicates-cancel[" in line)
    generated_line = next(line for line in replays if "specs::generated::adagrad-agrees-with-reference[" in line)
    for line in (spec_line, generated_line):
        replayed = run_from_elsewhere([sys.executable, *shlex.split(line)[1:]])
        assert replayed.returncode == 1, line + "\n" + replayed.stdout[-3000:] + replayed.stderr[-2000:]
        assert "1 failed" in replayed.stdout
    # the generated item ran the failing example its run kept, found beside the candidate
    assert f"--conformance-counterexamples {earlier}" in replayed.stdout
    assert not (elsewhere / "reports").exists()  # nothing written where the reproducers ran
