"""Issue 22's probes around `conformance check` and the run it starts, recreated as tests: each
produces its fault on purpose and checks what happens now (docs/robustness.md). The runs are
narrowed to tests/data/robustness_adagrad.yaml (three cases) so each costs a few seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.core.target import CandidateTarget
from conformance.specs.load import SpecError, load_spec
from conformance_runs import MINIMAL_COALESCE_SPEC

SPEC = MINIMAL_COALESCE_SPEC


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


# ------------------------------------------------------------------ spec files

def test_two_unknown_keys_of_mixed_type_are_one_clear_error(tmp_path):
    # a bare `on:` reads as the boolean true; with a str typo beside it sorted() once raised TypeError
    path = write(tmp_path, SPEC.replace("cases:", "on: push\ntpyo: 1\ncases:"))
    with pytest.raises(SpecError, match=r"unexpected field True \(YAML reads a bare on/off/yes/no as a boolean\)"):
        load_spec(path)


def test_a_duplicate_key_is_an_error_naming_both_lines(tmp_path):
    path = write(tmp_path, SPEC.replace("    dtypes: [float32]\n", "    dtypes: [float32]\n    dtypes: [float64]\n"))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value) == f"{path}:6: duplicate key 'dtypes' (first given on line 5)"


# ------------------------------------------------------------------ helpers: real runs, narrowed

import json
import os
import signal
import subprocess
import sys
import time
import types
from collections import Counter

from conformance.entry_points import check, supervise
from conformance.results.store import FORMAT, SCHEMA_VERSION, previous_path
from conformance_runs import NO_GC_AT_EXIT, REPO, SMALL_SPEC, base_args, by_case, load, run_inprocess

FAULTS = "tests/candidates/faults.py"


def env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **extra}


def run_check(tmp_path: Path, candidate: str, *pytest_args: str, timeout: float = 300,
              **extra_env: str) -> tuple[subprocess.CompletedProcess, Path]:
    """``python -m conformance check adagrad=<fault>`` on the small spec only, from the repository, with
    one worker (a second would only import torch again: the small spec has a handful of items)."""
    results = tmp_path / "reports" / "candidate.json"
    proc = subprocess.run([sys.executable, "-m", "conformance", "check", f"adagrad={FAULTS}:{candidate}",
                           "--specs", str(SMALL_SPEC), "--results", str(results),
                           "--report", str(tmp_path / "reports" / "check.html"), "--workers", "1",
                           "--pytest-args", " ".join(["--conformance-examples 0", *pytest_args])],
                          cwd=REPO, env=env(**extra_env), capture_output=True, text=True, timeout=timeout)
    return proc, results


def pytest_run(tmp_path: Path, candidate: str, *args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, Path]:
    results = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", *base_args(results), str(SMALL_SPEC),
                           "--conformance-examples", "0", "--conformance-impl", f"adagrad={FAULTS}:{candidate}", *args],
                          cwd=REPO, env=env(), capture_output=True, text=True, timeout=timeout)
    return proc, results


# ------------------------------------------------------------------ check: usage errors touch nothing

@pytest.mark.parametrize("impl, phrase", [
    ("adagard=torch.optim:Adagrad", "unknown op 'adagard'; known ops: adagrad"),
    # both through the probe's child process (about 5 s each): the slow tier; the fast tier's check
    # runs the probe too (tests/test_entry_points.py)
    pytest.param("adagrad=no_such_module_here:Adagrad", "importing no_such_module_here raised ModuleNotFoundError",
                 marks=pytest.mark.slow),
    pytest.param("adagrad=torch.optim:NoSuchClass", "torch.optim has no attribute 'NoSuchClass'", marks=pytest.mark.slow),
    ("adagrad=no/such/file.py:Adagrad", "no such file no/such/file.py"),
    ("adagrad=torch.optim", "expected OP=module:attr"),
])
def test_a_usage_error_runs_nothing_prints_no_counts_and_touches_no_file(tmp_path, monkeypatch, capsys, impl, phrase):
    reports = tmp_path / "reports"
    reports.mkdir()
    old = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "run": {"id": "old", "status": "complete"},
           "records": []}
    (reports / "candidate.json").write_text(json.dumps(old))
    (reports / "index.html").write_text("the main job's report")
    monkeypatch.chdir(tmp_path)
    assert check.main([impl]) == check.USAGE
    output = capsys.readouterr()
    assert phrase in output.err and "RESULT" not in output.out + output.err
    assert "pytest" not in output.out  # never started
    assert json.loads((reports / "candidate.json").read_text())["run"]["id"] == "old"
    assert sorted(p.name for p in reports.iterdir()) == ["candidate.json", "index.html"]


@pytest.mark.parametrize("option, phrase", [
    (["--examples", "-1"], "argument --examples: expected a whole number >= 0, got '-1'"),
    (["--examples", "1000001"], "argument --examples: expected a whole number <= 1,000,000, got '1000001'"),
    (["--workers", "0"], "argument --workers: expected a number >= 1 or 'auto', got '0'"),
])
def test_a_bad_check_option_is_a_usage_error_not_could_not_judge(tmp_path, monkeypatch, capsys, option, phrase):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        check.main(["adagrad=torch.optim:Adagrad", *option])
    assert exited.value.code == check.USAGE
    assert phrase in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


def test_specs_that_are_not_there_are_a_usage_error_before_the_candidate_is_imported(tmp_path, monkeypatch, capsys):
    """Issue 52 (F13): it was COULD NOT JUDGE ("a -k or --conformance-* option?") after the whole run."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(check, "_probe", lambda *args, **kwargs: pytest.fail("the candidate was imported"))
    assert check.main(["adagrad=torch.optim:Adagrad", "--specs", str(SMALL_SPEC), "no/such.yaml"]) == check.USAGE
    assert "usage error: --specs no/such.yaml: no such file or folder" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


def test_check_runs_100_examples_on_one_worker_per_core_unless_told():
    command = check.pytest_command([CandidateTarget.parse("adagrad=m:A")], results=Path("r.json"))
    assert command[command.index("--conformance-examples") + 1] == "100"
    assert command[command.index("-n") + 1] == "auto"
    command = check.pytest_command([CandidateTarget.parse("adagrad=m:A")], results=Path("r.json"), examples=3, workers="2")
    assert command[command.index("--conformance-examples") + 1] == "3" and command[command.index("-n") + 1] == "2"


@pytest.mark.slow
def test_a_candidate_that_ends_the_process_at_import_is_a_usage_error_not_a_pass(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "conformance", "check", f"adagrad={REPO / FAULTS}:ExitingAdagrad"],
                          cwd=tmp_path, env=env(CONFORMANCE_TEST_EXIT_AT_IMPORT="1"), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == check.USAGE
    assert "importing the candidate ended the process (exit status 0)" in proc.stderr
    assert "RESULT" not in proc.stdout


@pytest.mark.slow
def test_check_help_lists_every_op_in_plain_text():
    from conformance.ops import OPS

    proc = subprocess.run([sys.executable, "-m", "conformance", "check", "--help"], env=env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert f"one of: {', '.join(OPS)}" in text
    assert "``" not in proc.stdout and ":func:" not in proc.stdout


# ------------------------------------------------------------------ check: the verdict, from its own run's file

def document(run_id="mine", status="complete", outcomes=(), not_run=(), others=(), other_backend="coo") -> dict:
    records = [{"nodeid": f"x::c{i}[candidate-cpu-float32]", "backend": "candidate", "op": "adagrad", "outcome": o,
                "message": None} for i, o in enumerate(outcomes)]
    records += [{"nodeid": f"x::c{i}[{other_backend}-cpu-float32]", "backend": other_backend, "op": "adagrad",
                 "outcome": o} for i, o in enumerate(others)]
    return {"run": {"id": run_id, "status": status, "not_run": list(not_run)}, "records": records}


@pytest.mark.parametrize("doc, status, code, phrase", [
    (None, 0, check.COULD_NOT_JUDGE, "no results file"),
    (document(run_id="previous", outcomes=["passed"]), 0, check.COULD_NOT_JUDGE, "another run's"),
    (document(status="running", outcomes=["passed"]), 0, check.COULD_NOT_JUDGE, "did not complete"),
    (document(status="interrupted", outcomes=["passed"], not_run=["x::c9"]), 2, check.COULD_NOT_JUDGE, "1 items not run"),
    (document(outcomes=[]), 0, check.COULD_NOT_JUDGE, "no candidate item of adagrad"),
    (document(outcomes=["unsupported"] * 49), 0, check.UNSUPPORTED, "every candidate item was unsupported"),
    (document(outcomes=["passed", "failed"]), 1, check.FAIL, "1 candidate item(s) failed"),
    (document(status="interrupted", outcomes=["error"]), 2, check.FAIL, "did not complete"),
    (document(outcomes=["passed"], others=["failed"]), 1, check.PASS, "a finding about torch, not your implementation"),
    (document(outcomes=["passed", "failed"], others=["failed"]), 1, check.FAIL, "1 candidate item(s) failed"),
    (document(outcomes=["passed"], others=["failed"], other_backend=None), 1, check.COULD_NOT_JUDGE,
     "the specs themselves"),
    (document(outcomes=["passed"]), 3, check.COULD_NOT_JUDGE, "pytest exited with status 3"),
    (document(outcomes=["passed", "xfail", "unsupported"]), 0, check.PASS, ""),
])
def test_the_verdict_passes_only_a_complete_run_of_its_own_that_ran_something(doc, status, code, phrase):
    verdict = check.judge(doc, run_id="mine", status=status, ops=["adagrad"])
    assert verdict.code == code and phrase in verdict.reason, verdict


# ------------------------------------------------------------------ check end to end: crashes and hangs

@pytest.mark.slow
def test_check_survives_a_candidate_that_exits_the_process(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "index.html").write_text("the main job's report")
    previous = {"format": FORMAT, "schema_version": SCHEMA_VERSION,
                "run": {"id": "previous-run", "status": "complete"}, "records": []}
    (reports / "candidate.json").write_text(json.dumps(previous))
    proc, results = run_check(tmp_path, "ExitingAdagrad")  # os._exit(0) on one input
    output = proc.stdout + proc.stderr
    assert proc.returncode == check.FAIL, output[-3000:]
    assert "RESULT: FAIL" in output and "crashed: " in output and "misbehave-here" in output
    document_ = load(results)
    assert document_["run"]["status"] == "complete"
    records = by_case(document_)
    crashed = records["misbehave-here[candidate-cpu-float64]"]
    assert crashed["outcome"] == "error" and crashed["crashed"] and "exited with status 0" in crashed["message"]
    assert records["before[candidate-cpu-float64]"]["outcome"] == "passed"
    assert records["after[candidate-cpu-float64]"]["outcome"] == "passed"  # every other record kept
    assert json.loads(previous_path(results).read_text())["run"]["id"] == "previous-run"  # moved aside
    assert (reports / "index.html").read_text() == "the main job's report" and (reports / "check.html").is_file()


@pytest.mark.slow
def test_check_ends_a_candidate_deadlocked_in_native_code(tmp_path):
    timeout = 20  # a fresh worker's first item spends seconds importing (lazily, in Python): not the hang
    started = time.monotonic()
    proc, results = run_check(tmp_path, "NativeDeadlockAdagrad", f"--conformance-timeout {timeout}", "-k misbehave")
    assert time.monotonic() - started < timeout + 60 + 60  # + 60: start-ups of four interpreters on a loaded 2-core machine
    output = proc.stdout + proc.stderr
    assert proc.returncode == check.FAIL, output[-3000:]
    record = by_case(load(results))["misbehave-here[candidate-cpu-float64]"]
    assert record["outcome"] == "error" and record["timed_out"] is True
    assert record["message"].startswith("timed out in native code") and "pthread_mutex_lock" not in record["message"]
    assert "faults.py" in record["message"]  # where it hung: faulthandler's traceback of the item's thread


@pytest.mark.slow
def test_a_candidate_holding_the_gil_in_c_is_ended_too(tmp_path):
    # the candidate blocks in C holding the GIL; a 10 s item timeout, as short as a loaded machine's
    # fresh worker allows (its first call of the op is made before the item's timer starts)
    proc, results = pytest_run(tmp_path, "GilHoldingAdagrad", "-n", "1", "-p", "no:benchmark",
                               "--conformance-timeout", "10", "-k", "misbehave")
    document_ = load(results)
    assert proc.returncode == 1 and document_["run"]["status"] == "complete", proc.stdout[-3000:]
    record = by_case(document_)["misbehave-here[candidate-cpu-float64]"]
    assert record["outcome"] == "error" and record["message"].startswith("timed out in native code")


@pytest.mark.slow
def test_an_abort_is_recorded_with_its_signal(tmp_path):
    proc, results = pytest_run(tmp_path, "AbortingAdagrad", "-n", "1", "-p", "no:benchmark")
    records = by_case(load(results))
    assert proc.returncode == 1
    crashed = records["misbehave-here[candidate-cpu-float64]"]
    assert crashed["signal"] == "SIGABRT" and "killed by SIGABRT" in crashed["message"]
    assert records["after[candidate-cpu-float64]"]["outcome"] == "passed"


# ------------------------------------------------------------------ in one process: what a candidate may not do

def test_pytest_exit_from_a_candidate_is_that_items_error():
    code, path = run_inprocess("pytest-exit", str(SMALL_SPEC), "--conformance-examples", "0", "--conformance-backend", "candidate",
                               "--conformance-impl", f"adagrad={FAULTS}:PytestExitAdagrad")
    document_ = load(path)
    assert code == 1 and document_["run"]["status"] == "complete"
    records = by_case(document_)
    assert records["misbehave-here[candidate-cpu-float64]"]["outcome"] == "error"
    assert "called pytest.exit(" in records["misbehave-here[candidate-cpu-float64]"]["message"]
    assert records["after[candidate-cpu-float64]"]["outcome"] == "passed"


@pytest.mark.parametrize("sigint_handler", [signal.default_int_handler, signal.SIG_IGN], indirect=True,
                         ids=["terminal", "ignored"])
def test_a_keyboard_interrupt_the_candidate_raises_itself_is_that_items_error(sigint_handler):
    """It ended the whole run ("interrupted"; a crashed worker under xdist): no signal came, so it is the
    candidate's own exception, as a SystemExit is (a real Ctrl-C: tests/test_results.py)."""
    code, path = run_inprocess("own-keyboard-interrupt", str(SMALL_SPEC), "--conformance-examples", "0", "--conformance-backend", "candidate",
                               "--conformance-impl", f"adagrad={FAULTS}:KeyboardInterruptAdagrad")
    document_ = load(path)
    assert code == 1 and document_["run"]["status"] == "complete"
    records = by_case(document_)
    raising = records["misbehave-here[candidate-cpu-float64]"]
    assert raising["outcome"] == "error", raising
    assert "raised KeyboardInterrupt(\"the candidate's own\") during this item, and no SIGINT" in raising["message"]
    assert records["after[candidate-cpu-float64]"]["outcome"] == "passed"


def test_an_exception_whose_str_raises_or_is_not_a_string_is_that_items_error():
    code, path = run_inprocess("hostile-str", str(SMALL_SPEC), "--conformance-examples", "0", "--conformance-backend", "candidate",
                               "--conformance-impl", f"adagrad={FAULTS}:HostileStrAdagrad")
    records = by_case(load(path))
    assert code == 1
    raising = records["misbehave-here[candidate-cpu-float64]"]
    assert raising["outcome"] == "error" and "_HostileStr object; str() failed: RuntimeError" in raising["message"]
    wrong_type = records["after[candidate-cpu-float64]"]
    assert wrong_type["outcome"] == "error" and "__str__ returned non-string" in wrong_type["message"]


def test_a_generated_item_whose_failure_has_a_hostile_str_is_that_items_error():
    code, path = run_inprocess("hostile-str-generated", "specs", "--conformance-examples", "2",
                               "-k", "generated and adagrad-agrees-with-reference and candidate-cpu-float64",
                               "--conformance-impl", f"adagrad={FAULTS}:AlwaysHostileStrAdagrad")
    document_ = load(path)
    assert code == 1 and document_["run"]["status"] == "complete"
    [record] = [r for r in document_["records"] if r["backend"] == "candidate"]
    assert record["outcome"] in ("error", "failed")
    assert "_HostileStr object; str() failed: RuntimeError" in record["message"]


@pytest.mark.slow
def test_a_stray_non_daemon_thread_does_not_keep_pytest_from_exiting(tmp_path):
    proc, results = pytest_run(tmp_path, "StrayThreadAdagrad", timeout=120)  # would hang forever before
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "not waiting for 1 non-daemon thread(s)" in proc.stderr and "candidate-pool-worker" in proc.stderr
    assert load(results)["run"]["status"] == "complete"


# ------------------------------------------------------------------ options and files

def plugin_main(*args: str) -> int:
    return int(pytest.main(["-p", "no:cacheprovider", "-q", "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"),
                            "-o", "addopts=", *NO_GC_AT_EXIT, "--conformance-device", "cpu", "--conformance-examples", "0",
                            str(SMALL_SPEC), *args]))


def test_a_results_path_holding_another_file_is_refused(tmp_path, capsys):
    setup = tmp_path / "setup.py"
    setup.write_text("from setuptools import setup\nsetup()\n")
    assert plugin_main("--conformance-results", str(setup)) == int(pytest.ExitCode.USAGE_ERROR)
    assert "exists and is not a results file of this suite; not overwriting it" in capsys.readouterr().err
    assert setup.read_text() == "from setuptools import setup\nsetup()\n"


@pytest.mark.parametrize("body, says", [("import sys\nsys.exit(3)\n", "raised SystemExit: 3"),
                                         ("raise KeyboardInterrupt\n", "raised KeyboardInterrupt")])
def test_a_candidate_that_exits_or_is_interrupted_while_imported_is_a_usage_error(tmp_path, capsys, body, says):
    """Under plain pytest (``--conformance-impl``), not only under check: SystemExit was an INTERNALERROR
    (exit 3), KeyboardInterrupt exit 2 with no output."""
    module = tmp_path / "ends_its_import.py"
    module.write_text(body)
    code = plugin_main("--conformance-impl", f"adagrad={module}:Adagrad", "--conformance-backend", "candidate",
                       "--conformance-results", str(tmp_path / "r.json"))
    assert code == int(pytest.ExitCode.USAGE_ERROR)
    err = capsys.readouterr().err
    assert f"importing {module} {says}" in err, err


def test_a_folder_where_the_previous_results_are_kept_is_a_usage_error_naming_it(tmp_path, capsys):
    """``.previous/r.json`` a folder: the error named r.json ("Is a directory") after the run had started,
    and left ``.previous/.r.json.tmp`` behind."""
    (tmp_path / ".previous" / "r.json").mkdir(parents=True)
    assert plugin_main("--conformance-results", str(tmp_path / "r.json")) == int(pytest.ExitCode.USAGE_ERROR)
    assert f"{tmp_path / '.previous' / 'r.json'} is not a regular file" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / ".previous").iterdir()) == ["r.json"]


def test_keeping_the_previous_file_names_where_it_failed_and_leaves_no_temporary_file(tmp_path):
    """The same folder appearing after the run's start (the writer's own check)."""
    from conformance.results.store import ResultsWriter

    path = tmp_path / "r.json"
    first = ResultsWriter(path, {"id": "first"})
    first.write("complete")
    (tmp_path / ".previous" / "r.json").mkdir(parents=True)
    with pytest.raises(OSError) as raised:
        ResultsWriter(path, {"id": "second"}).write("running")
    assert f"cannot keep the previous run's r.json as {tmp_path / '.previous' / 'r.json'}" in raised.value.strerror
    assert sorted(p.name for p in (tmp_path / ".previous").iterdir()) == ["r.json"]
    assert json.loads(path.read_text())["run"]["id"] == "first"  # the previous file is still there


def test_an_obstructed_previous_folder_is_a_usage_error(tmp_path, capsys):
    (tmp_path / ".previous").write_text("in the way")
    assert plugin_main("--conformance-results", str(tmp_path / "r.json")) == int(pytest.ExitCode.USAGE_ERROR)
    assert ".previous is a file, but the previous run's results are kept in that folder" in capsys.readouterr().err


def test_an_absurd_timeout_is_refused_when_options_are_parsed(capsys):
    assert plugin_main("--conformance-timeout", "1e10") == int(pytest.ExitCode.USAGE_ERROR)
    assert "--conformance-timeout: '1e10': must be at most 604800 seconds (a week)" in capsys.readouterr().err


@pytest.mark.parametrize("command, option, value, said", [
    (["check", "adagrad=torch.optim:Adagrad"], "--import-timeout", "1e300", "'1e300': must be at most 604800 seconds"),
    (["check", "adagrad=torch.optim:Adagrad"], "--run-timeout", "1e300", "'1e300': must be at most 604800 seconds"),
    (["check", "adagrad=torch.optim:Adagrad"], "--import-timeout", "nan", "'nan': must be a finite number of seconds > 0"),
    (["replay", "specs/adagrad.yaml::tutorial-step-1[coo-cpu-float64]"], "--timeout", "-5",
     "'-5': must be a finite number of seconds >= 0"),
    (["replay", "specs/adagrad.yaml::tutorial-step-1[coo-cpu-float64]"], "--timeout", "1e10",
     "'1e10': must be at most 604800 seconds"),
])
def test_check_s_and_replay_s_seconds_are_bounded_as_the_plugin_s(capsys, command, option, value, said):
    """check --import-timeout 1e300 overflowed poll() in the import probe (a traceback), --run-timeout
    1e300 the timer's thread; replay --timeout -5 started pytest, whose error named
    --conformance-timeout, not the option given. One type for all: a usage error naming the option."""
    from conformance.entry_points.cli import main

    with pytest.raises(SystemExit) as raised:
        main([*command, option, value])
    assert raised.value.code != 0
    err = capsys.readouterr().err
    assert f"argument {option}: {said}" in err and "Traceback" not in err


@pytest.mark.slow
def test_check_calls_a_candidate_that_supports_nothing_unsupported_not_pass(tmp_path):
    proc, results = run_check(tmp_path, "UnsupportedEverywhereAdagrad", "-k misbehave")
    output = proc.stdout + proc.stderr
    assert proc.returncode == check.UNSUPPORTED, output[-3000:]
    assert "RESULT: UNSUPPORTED (1 unsupported): every candidate item was unsupported" in output
    assert "RESULT: PASS" not in output


@pytest.mark.slow
def test_sigterm_to_check_reaches_its_pytest_which_writes_its_results_and_lets_go(tmp_path):
    from conformance.results.store import results_lock

    gate = tmp_path / "gate"
    results = tmp_path / "reports" / "candidate.json"
    proc = subprocess.Popen([sys.executable, "-m", "conformance", "check", f"adagrad={FAULTS}:WaitingAdagrad",
                             "--specs", str(SMALL_SPEC), "--results", str(results),
                             "--report", str(tmp_path / "reports" / "check.html"), "--workers", "1",
                             "--pytest-args", "--conformance-examples 0 -k misbehave"],
                            cwd=REPO, env=env(CONFORMANCE_TEST_GATE=str(gate)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while not gate.with_suffix(".waiting").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the candidate never got going"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == check.COULD_NOT_JUDGE, output[-3000:]
    assert "RESULT: COULD NOT JUDGE" in output and "interrupted by SIGTERM" in output
    run = load(results)["run"]
    assert run["status"] == "interrupted" and run["interrupted_by"] == "SIGTERM"
    lock = results_lock(results)
    lock.acquire(timeout=0)  # no orphan holds it
    lock.release()


def _small_disk():  # files past 4.5 kB cannot be written (EFBIG), as on a full disk
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4500, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


@pytest.mark.slow
def test_a_full_disk_mid_run_ends_the_run_interrupted_with_a_clean_message(tmp_path):
    results = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", *base_args(results), str(SMALL_SPEC), "-p", "no:junitxml",
                           "--conformance-examples", "0", "--conformance-results-every", "0.001",
                           "--conformance-impl", "adagrad=torch.optim:Adagrad"],
                          cwd=REPO, env=env(), capture_output=True, text=True, timeout=300, preexec_fn=_small_disk)
    output = proc.stdout + proc.stderr
    assert proc.returncode == int(pytest.ExitCode.INTERRUPTED), output[-3000:]
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert f"conformance: cannot write the results file {results}: File too large; the run stopped" in output
    document_ = load(results)  # the last write that fit: a valid file
    assert document_["run"]["status"] == "running" and 1 <= len(document_["records"]) < 3


@pytest.mark.slow
def test_the_progress_notice_leaves_hypothesis_observability_off(monkeypatch):
    """check's progress (``--conformance-progress``: the notice "shrinking <item>") comes from the
    search itself: through Hypothesis's observability callbacks, as it came before, every example was
    traced line by line and check's items ran 4-5 times slower. (The notice on the console:
    tests/test_check_robustness.py, slow tier.)"""
    import hypothesis.internal.observability as observability

    observed: list = []
    monkeypatch.setattr(observability, "add_observability_callback", observed.append)
    code, results = run_inprocess("progress", "specs", "--conformance-progress", "--conformance-op", "adagrad",
                                  "--conformance-examples", "2", "-k", "generated and agrees-with-reference and "
                                  "coo-cpu-float64")
    assert code == 0 and [r["outcome"] for r in load(results)["records"]] == ["passed"]
    assert observed == []


@pytest.mark.slow
def test_a_failing_check_says_when_it_is_shrinking(tmp_path):
    """The notice comes as shrinking starts; the run is then stopped (SIGTERM, which check hands on
    to its pytest), since the shrinking itself is not what is tested here."""
    results = tmp_path / "reports" / "candidate.json"
    notice = ("shrinking specs::generated::adagrad-agrees-with-reference[candidate-cpu-float64]: an example failed; "
              "Hypothesis is looking for the smallest failing example")
    proc = subprocess.Popen([sys.executable, "-m", "conformance", "check",
                             "adagrad=tests/candidates/drawn_only.py:LargeParamLrSlipAdagrad", "--results", str(results),
                             "--report", str(tmp_path / "reports" / "check.html"), "--workers", "1", "--pytest-args",
                             "--conformance-examples 10 -k 'generated and agrees-with-reference and candidate-cpu-float64'"],
                            cwd=REPO, env=env(PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    seen = []
    try:
        for line in proc.stdout:  # as the lines come: the notice is printed while the run goes on
            seen.append(line)
            if notice in line:
                proc.send_signal(signal.SIGTERM)
                break
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = "".join(seen) + (rest or "")
    assert notice in output, output[-3000:]
    assert proc.returncode in (check.FAIL, check.COULD_NOT_JUDGE), output[-3000:]  # stopped, or done first


@pytest.mark.slow
def test_a_second_sigterm_while_the_run_stops_gives_one_line_not_a_traceback(tmp_path):
    gate = tmp_path / "gate"
    results = tmp_path / "results.json"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *base_args(results), str(SMALL_SPEC),
                             "--conformance-examples", "0", "--conformance-impl", f"adagrad={FAULTS}:WaitingAdagrad"],
                            cwd=REPO, env=env(CONFORMANCE_TEST_GATE=str(gate)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while not gate.with_suffix(".waiting").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the candidate never got going"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # while it writes the results and reports
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == int(pytest.ExitCode.INTERRUPTED), output[-3000:]
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert "SIGTERM again: already stopping" in output
    assert load(results)["run"]["status"] == "interrupted"


def test_a_failing_verdict_names_each_crashed_and_failed_item_with_how_it_ended():
    records = [{"nodeid": "s::exit[candidate-cpu-float32]", "backend": "candidate", "op": "adagrad", "outcome": "error",
                "crashed": True, "message": "the worker process exited with status 0 (os._exit(0) or exit(0) in C)"},
               {"nodeid": "s::hang[candidate-cpu-float32]", "backend": "candidate", "op": "adagrad", "outcome": "error",
                "crashed": True, "timed_out": True, "message": "timed out in native code: ..."},
               {"nodeid": "s::abort[candidate-cpu-float32]", "backend": "candidate", "op": "adagrad",
                "outcome": "error", "crashed": True, "signal": "SIGABRT", "message": "the worker process was killed"},
               {"nodeid": "s::wrong[candidate-cpu-float32]", "backend": "candidate", "op": "adagrad",
                "outcome": "failed", "message": "mismatch"}]
    verdict = check.judge({"run": {"id": "a", "status": "complete", "not_run": []}, "records": records}, run_id="a",
                          status=1, ops=["adagrad"])
    assert verdict.code == check.FAIL
    assert verdict.lines()[1:] == ["  crashed: s::exit[candidate-cpu-float32] (exited with status 0)",
                                   "  crashed: s::hang[candidate-cpu-float32] (timed out in native code)",
                                   "  crashed: s::abort[candidate-cpu-float32] (killed by SIGABRT)",
                                   "  failed:  s::wrong[candidate-cpu-float32]"]


def test_a_check_whose_every_candidate_item_was_skipped_says_why():
    """check --device cuda on a machine without CUDA: COULD NOT JUDGE, with the device's reason."""
    why = "cuda not available: torch.cuda.is_available() is False"
    records = [{"nodeid": f"s::c{i}[candidate-cuda-float32]", "backend": "candidate", "op": "adagrad",
                "outcome": "skipped", "message": why} for i in range(3)]
    verdict = check.judge({"run": {"id": "a", "status": "complete", "not_run": []}, "records": records}, run_id="a",
                          status=0, ops=["adagrad"])
    assert verdict.code == check.COULD_NOT_JUDGE
    assert verdict.lines()[0] == f"RESULT: COULD NOT JUDGE (3 skipped): no candidate item ran: every one was skipped ({why})"


# ------------------------------------------------------------------ errors before imports (issue 30, point 6)

USAGE_ERRORS = [(["check", "--frobnicate", "adagrad=torch.optim:Adagrad"], 4), (["check"], 4),
                (["check", "adagrad=x:y", "--examples", "-1"], 4), (["check", "adagrad=x:y", "--workers", "0"], 4),
                (["gate", "--baseline", "a.json", "--candidate", "b.json", "--ratio", "nan"], 2),
                (["merge", "a.json"], 2), (["report"], 2)]


@pytest.mark.parametrize("argv, code", USAGE_ERRORS, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_a_usage_error_is_reported_without_loading_torch_or_the_ops(monkeypatch, capsys, argv, code):
    """The parser is built and run with torch and the op records unimportable: a usage error still
    ends in its documented status (check: 4, the others: 2), so it cannot have needed them."""
    from conformance.entry_points.cli import main

    for name in ("torch", "conformance.core.types", "conformance.ops"):
        monkeypatch.setitem(sys.modules, name, None)  # `import torch` now raises ImportError
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == code
    assert "error:" in capsys.readouterr().err


def test_a_mistyped_op_is_a_usage_error_without_loading_torch_or_the_ops(monkeypatch, capsys):
    from conformance.entry_points.cli import main
    from conformance.ops import OPS

    assert check.declared_op_names() == set(OPS)  # the records' names as read from their source
    for name in ("torch", "conformance.core.types", "conformance.ops"):
        monkeypatch.setitem(sys.modules, name, None)
    assert main(["check", "adagrd=torch.optim:Adagrad"]) == 4
    assert "unknown op 'adagrd'; known ops: adagrad, coalesce" in capsys.readouterr().err


@pytest.mark.slow
def test_python_m_conformance_parses_before_it_imports_torch(tmp_path):
    """In a fresh interpreter (-X importtime lists every module imported): a usage error of
    ``python -m conformance`` comes before torch is imported, and ``check --frobnicate`` is 4."""
    for argv, code in [*USAGE_ERRORS, (["check", "adagrd=torch.optim:Adagrad"], 4)]:
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "conformance", *argv], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == code, (argv, proc.stderr[-2000:])
        imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
        assert "torch" not in imported and "conformance.ops" not in imported, argv
        assert "error:" in proc.stderr or "usage error:" in proc.stderr


# ------------------------------------------------------------------ a report that says what it is (issue 30, point 7)

def test_check_html_states_the_verdict_and_a_second_check_says_what_it_moved(tmp_path, monkeypatch, capsys):
    """pytest itself stubbed: it writes a complete run of one passing candidate item."""
    from conformance.entry_points.cli import main
    from conformance_runs import stub_checks_pytest
    from test_results_files import record

    monkeypatch.chdir(tmp_path)
    stub_checks_pytest(monkeypatch, [record("c", op="adagrad", backend="candidate",
                                            nodeid="specs/adagrad.yaml::c[candidate-cpu-float32]")],
                       label="candidate adagrad=torch.optim:Adagrad")
    assert main(["check", "adagrad=torch.optim:Adagrad"]) == 0
    first = capsys.readouterr().out
    assert "RESULT: PASS" in first and "moved the previous" not in first
    page = (tmp_path / "reports" / "check.html").read_text(encoding="utf-8")
    assert "<title>PASS · candidate adagrad=torch.optim:Adagrad · torch 2.13.0: adagrad on candidate (cpu)</title>" in page
    assert '<div id="verdict" class="verdict v-pass"><strong>RESULT: PASS (1 passed)</strong>' in page
    assert page.index('id="verdict"') < page.index('<section id="runs">')

    assert main(["check", "adagrad=torch.optim:Adagrad"]) == 0
    second = capsys.readouterr().out
    assert "conformance check: moved the previous results to reports/.previous/candidate.json" in second, second
    assert "conformance check: moved the previous report to reports/.previous/check.html" in second, second
    assert (tmp_path / "reports" / ".previous" / "check.html").is_file()


def test_a_check_refused_by_a_running_checks_lock_moves_nothing_of_it(tmp_path, monkeypatch, capsys):
    """The lock is tested before the previous check's files are set aside: a second check in the
    folder was refused only by its pytest, after it had removed the running check's results file and
    JUnit XML and moved its counterexample scripts (round five, F6)."""
    from conformance.entry_points.cli import main
    from conformance.results.store import take_lock

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(check, "_probe", lambda *args, **kwargs: None)
    monkeypatch.setattr(supervise, "run_pytest", lambda command: pytest.fail("pytest was started"))
    reports = (tmp_path / "reports").resolve()
    (reports / "counterexamples").mkdir(parents=True)
    running = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "run": {"id": "running", "status": "running"},
               "records": []}
    files = {reports / "candidate.json": json.dumps(running), reports / "candidate.junit.xml": "<testsuites/>",
             reports / "counterexamples" / "adagrad_c.py": "# the running check's counterexample"}
    for path, text in files.items():
        path.write_text(text)
    lock = take_lock(reports / "candidate.json")  # the running check's pytest
    try:
        assert main(["check", "adagrad=torch.optim:Adagrad"]) == check.USAGE
    finally:
        lock.release()
    err = capsys.readouterr().err
    assert f"--results {reports / 'candidate.json'}: another run is writing this results file" in err, err
    assert {path: path.read_text() for path in files} == files
    assert not (reports / ".previous").exists() and not (reports / "counterexamples" / ".previous").exists()


# ------------------------------------------------------------------ the import probe is bounded (issue 30, point 3)

SLEEPY = """\
import os, sys, time
open(os.environ["PROBE_PID_FILE"], "w").write(str(os.getpid()))
time.sleep(600)
def x(tensor):
    return tensor.coalesce()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is ended
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    except OSError:
        return True


def _sleepy_check(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    (tmp_path / "sleepy.py").write_text(SLEEPY)
    pid_file = tmp_path / "probe.pid"
    env = {**os.environ, "PROBE_PID_FILE": str(pid_file)}
    proc = subprocess.Popen([sys.executable, "-m", "conformance", "check", "coalesce=sleepy.py:x", *args],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, pid_file


@pytest.mark.slow
def test_an_import_that_never_returns_is_a_usage_error_after_the_import_timeout(tmp_path):
    proc, pid_file = _sleepy_check(tmp_path, "--import-timeout", "20")  # torch's import takes a few of them
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err
    assert "importing the candidate did not finish within 20 s" in err
    assert pid_file.exists() and not _alive(int(pid_file.read_text()))
    assert not (tmp_path / "reports").exists()  # nothing run, nothing written


@pytest.mark.slow
def test_sigterm_while_probing_ends_the_probe_too(tmp_path):
    proc, pid_file = _sleepy_check(tmp_path)
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    probe = int(pid_file.read_text())
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "SIGTERM received while importing the candidate" in err, err
    deadline = time.monotonic() + 10
    while _alive(probe) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(probe), "the probe was left running as an orphan"
