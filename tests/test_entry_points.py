"""The fast tier's end-to-end runs of the two entry points that start a pytest of their own,
``conformance check`` and ``conformance replay``, in this process: each one's ``main(argv)`` is
called here on a narrow selection, and the pytest command line it builds runs here too
(``pytest.main``) instead of in a child interpreter. Everything else is theirs: the options, the
candidate's probe (check's: a child interpreter that imports it; replay's, the same, is skipped here),
the results file, the verdict, the report, the exit status. The same commands across the process boundary -- with crashes, hangs and
signals; replay from an empty directory -- are in the slow tier (``python -m pytest --run-slow``):
tests/test_check_robustness.py, tests/test_replay.py, tests/test_docs.py; check at its defaults and
from a wheel in the acceptance tier (``--run-acceptance``): tests/test_wheel.py, tests/test_docs.py,
tests/test_hangs.py. The other entry points' fast end-to-end tests run in this
process too: ``pytest specs`` (tests/test_outcomes.py, pytester), ``report`` (tests/test_report.py),
``gate`` (tests/test_gate.py), ``merge`` (tests/test_merge.py, shards of a narrow run)."""

from __future__ import annotations

import json
import sys

import pytest

from conformance.entry_points import check, supervise
from conformance.entry_points.cli import main as cli_main
from conformance_runs import MUTANTS, REPO, pytest_here, replay_here, SMALL_SPEC, by_case, wrong_adagrad_source


def _check(tmp_path, monkeypatch, impl: str) -> tuple[int, dict]:
    """``conformance check IMPL`` on the small spec (three cases, float64), no generated examples,
    its pytest in this process."""
    monkeypatch.setattr(supervise, "run_pytest", lambda command: (pytest_here(command), None))
    results = tmp_path / "reports" / "candidate.json"
    code = check.main([impl, "--specs", str(SMALL_SPEC), "--results", str(results),
                       "--report", str(tmp_path / "reports" / "check.html"), "--examples", "0",
                       "--pytest-args", "-n 0"])
    return code, json.loads(results.read_text(encoding="utf-8"))


@pytest.mark.slow  # 1.5-5 s: the fast tier stays within 90 s in a fresh clone
def test_check_fails_the_wrong_adagrad_naming_the_item_with_torch_beside_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)  # the candidate's path is relative to the repository, as in the README
    code, document = _check(tmp_path, monkeypatch, f"adagrad={MUTANTS}:SquareBeforeSumAdagrad")
    output = capsys.readouterr().out
    assert code == check.FAIL, output[-3000:]
    assert "RESULT: FAIL" in output and "failed:  " in output and "after[candidate-cpu-float64]" in output
    assert document["run"]["status"] == "complete"
    records = by_case(document)
    assert records["after[candidate-cpu-float64]"]["outcome"] == "failed"
    assert records["after[candidate-cpu-float64]"]["verdict"] == "differs"
    assert records["after[coo-cpu-float64]"]["outcome"] == "passed"  # stock torch, beside it
    assert records["before[candidate-cpu-float64]"]["outcome"] == "passed"
    assert (tmp_path / "reports" / "check.html").is_file()


def test_replay_reruns_one_failing_item_and_prints_its_own_command(tmp_path, monkeypatch, capsys):
    replay_here(monkeypatch)
    monkeypatch.chdir(tmp_path)  # from a directory of the user's own, with their Adagrad in a file
    (tmp_path / "my_adagrad.py").write_text(wrong_adagrad_source(), encoding="utf-8")
    wrong = "adagrad=my_adagrad.py:SquareBeforeSumAdagrad"
    item = "specs/adagrad.yaml::duplicates-cancel[candidate-cpu-float32]"
    assert cli_main(["replay", item, "--impl", wrong]) == 1
    output = capsys.readouterr().out
    # the printed command names the file by its absolute path: it runs from any directory (issue 43)
    absolute = f"adagrad={tmp_path / 'my_adagrad.py'}:SquareBeforeSumAdagrad"
    assert "1 failed" in output and f"replay: python -m conformance replay '{item}' --impl {absolute}" in output, output
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["my_adagrad.py"]


@pytest.mark.parametrize("command", ["check", "replay"])
def test_pytest_args_may_start_with_a_dash(command):
    """``--pytest-args "--durations=10"`` is a value, not an option argparse stops at ("expected one
    argument", exit 4, as it was until 2026-11-26)."""
    from conformance.entry_points.cli import _attach_pytest_args, build_parser

    target = "adagrad=torch.optim:Adagrad" if command == "check" else "specs::generated::x[coo-cpu-float32]"
    argv = _attach_pytest_args([command, target, "--pytest-args", "--durations=10", "--pytest-args"])
    args, unknown = build_parser().parse_known_args(argv[:-1])
    assert args.pytest_args == "--durations=10" and not unknown
    assert argv[-1] == "--pytest-args"  # a trailing flag without its value is left for argparse to name
