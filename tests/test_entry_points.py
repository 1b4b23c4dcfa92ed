"""The fast tier's end-to-end runs of the entry points that start a pytest of their own
(``conformance check``, ``conformance replay``): each entry point's ``main(argv)`` is called in
this process on a narrow selection, so each costs one child pytest. The full runs -- check at its
defaults, from a wheel, with crashes and signals; replay from an empty directory -- are in the slow
tier (``python -m pytest --run-slow``): tests/test_check_robustness.py, tests/test_replay.py,
tests/test_wheel.py. The other entry points' fast end-to-end tests run in this process with no
child at all: ``pytest specs`` (tests/test_outcomes.py, pytester), ``report`` (tests/test_report.py),
``gate`` (tests/test_gate.py), ``merge`` (tests/test_merge.py, shards of a narrow run)."""

from __future__ import annotations

import json

from conformance import check
from conformance.cli import main as cli_main
from conformance_runs import MUTANTS, REPO, SMALL_SPEC, by_case, wrong_adagrad_source


def _check(tmp_path, impl: str, *more: str) -> tuple[int, dict]:
    """``conformance check IMPL`` on the small spec (three cases, float64), no generated examples,
    one pytest process (no xdist workers)."""
    results = tmp_path / "reports" / "candidate.json"
    code = check.main([impl, "--specs", str(SMALL_SPEC), "--results", str(results),
                       "--report", str(tmp_path / "reports" / "check.html"), "--examples", "0",
                       "--pytest-args", " ".join(["-n 0", *more])])
    return code, json.loads(results.read_text(encoding="utf-8"))


def test_check_fails_the_wrong_adagrad_naming_the_item_with_torch_beside_it(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(REPO)  # the candidate's path is relative to the repository, as in the README
    code, document = _check(tmp_path, f"adagrad={MUTANTS}:SquareBeforeSumAdagrad")
    output = capfd.readouterr().out
    assert code == check.FAIL, output[-3000:]
    assert "RESULT: FAIL" in output and "failed:  " in output and "after[candidate-cpu-float64]" in output
    assert document["run"]["status"] == "complete"
    records = by_case(document)
    assert records["after[candidate-cpu-float64]"]["outcome"] == "failed"
    assert records["after[candidate-cpu-float64]"]["verdict"] == "differs"
    assert records["after[coo-cpu-float64]"]["outcome"] == "passed"  # stock torch, beside it
    assert records["before[candidate-cpu-float64]"]["outcome"] == "passed"
    assert (tmp_path / "reports" / "check.html").is_file()


def test_replay_reruns_one_failing_item_and_prints_its_own_command(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)  # from a directory of the user's own, with their Adagrad in a file
    (tmp_path / "my_adagrad.py").write_text(wrong_adagrad_source(), encoding="utf-8")
    wrong = "adagrad=my_adagrad.py:SquareBeforeSumAdagrad"
    item = "specs/adagrad.yaml::duplicates-cancel[candidate-cpu-float32]"
    assert cli_main(["replay", item, "--impl", wrong]) == 1
    output = capfd.readouterr().out
    assert "1 failed" in output and f"replay: python -m conformance replay '{item}' --impl {wrong}" in output
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["my_adagrad.py"]
