"""The fast tier's end-to-end runs of the entry points that start a pytest of their own
(``conformance check``, ``conformance replay``) and of ``conformance merge`` on real shards: each
entry point's ``main(argv)`` is called in this process, on a narrow selection, so each costs one
child interpreter (check, replay) or none (merge). The full runs -- check at its defaults, from a
wheel, with crashes and signals, replay from an empty directory, shards in fresh interpreters -- are
in the slow tier (``python -m pytest --run-slow``): tests/test_check_robustness.py,
tests/test_replay.py, tests/test_wheel.py, tests/test_merge.py. The other entry points' fast
end-to-end tests: ``pytest specs`` (tests/test_outcomes.py, pytester in process), ``report``
(tests/test_report.py), ``gate`` (tests/test_gate.py)."""

from __future__ import annotations

import json

from conformance import check
from conformance.cli import main as cli_main
from conformance.results.store import load_results
from conformance_runs import MUTANTS, REPO, SMALL_SPEC, by_case, run_inprocess, wrong_adagrad_source


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


def test_merge_joins_shards_into_the_unsharded_run(tmp_path, capsys):
    """Three shards and the unsharded run of the same narrow selection, in this process (spec cases
    only: which example a generated item reports depends on what the process ran before it)."""
    args = [str(SMALL_SPEC), "--conformance-backend", "reference,coo,candidate", "--conformance-examples", "0",
            "--conformance-impl", f"adagrad={MUTANTS}:SquareBeforeSumAdagrad"]
    code, whole = run_inprocess("entry-merge-whole", *args)
    assert code == 1  # the wrong candidate fails `after`
    shards = []
    for k in (1, 2, 3):
        code, shard = run_inprocess(f"entry-merge-shard-{k}", *args, "--conformance-shard", f"{k}/3")
        assert code in (0, 1, 5)  # 5: no item hashed to this shard
        shards.append(shard)
    merged = tmp_path / "merged.json"
    assert cli_main(["merge", *map(str, reversed(shards)), "-o", str(merged)]) == 0
    assert f"{merged} (3 shards, " in capsys.readouterr().out
    timings = ("seconds", "timing")
    records = {r["nodeid"]: {k: v for k, v in r.items() if k not in timings} for r in load_results(merged).records}
    unsharded = load_results(whole)
    assert records == {r["nodeid"]: {k: v for k, v in r.items() if k not in timings} for r in unsharded.records}
    assert len(records) == 9  # three cases on three backends
    run = load_results(merged).run
    assert run["status"] == unsharded.run["status"] == "complete"
    assert run["exit_status"] == unsharded.run["exit_status"] == 1
    assert [s["shard"] for s in run["shards"]] == ["1/3", "2/3", "3/3"]
