"""Every wait bounded (issue 30, point 3): a native hang in a run in one process ends the run with the
results file naming the hung item (conformance/run/plain_watchdog.py's PlainWatchdog); every child process
``conformance check`` starts has a timeout and leaves nothing behind (supervise.run_pytest); a candidate
that crashes or hangs on every input stops the run early (conformance/run/breaker.py,
``--conformance-max-crashes``, which check gives as ``--max-crashes``), and one whose first call
hangs stops it within that call's limit (conformance/run/items.py's HungFirstCall: the call is stopped
there, or its worker ended when it is stuck in C, and its items are not run; the candidate's limit
from check's import probe, conformance/run/plugin.py's first_call_limit)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from hypothesis.errors import FlakyFailure

from conformance.cases.search import _timeout_in
from conformance.core.types import ExampleTimedOut
from conformance.entry_points import check
from conformance_runs import REPO, SMALL_SPEC, base_args, by_case, load, run_inprocess

FAULTS = "tests/candidates/faults.py"

SLEEPY = textwrap.dedent("""\
    import time

    import torch


    class SleepyAdagrad(torch.optim.Adagrad):
        '''Sleeps on every input of the spec's items (float64), past any short timeout; its first
        call, made before any item runs (float32), returns: each item then runs and times out.'''

        def step(self, closure=None):
            if self.param_groups[0]["params"][0].dtype == torch.float64:
                time.sleep(3)
            return super().step(closure)
""")

STUCK = textwrap.dedent("""\
    import time

    import torch


    class StuckAdagrad(torch.optim.Adagrad):
        '''Never returns from a step, its first included (a wait with the GIL released, as a deadlock).'''

        def step(self, closure=None):
            time.sleep(120)
""")

GIL_HELD = textwrap.dedent("""\
    import torch


    class GilHeldAdagrad(torch.optim.Adagrad):
        '''Spins in C holding the GIL on every input (the first call included).'''

        def step(self, closure=None):
            sum(range(10**14))
""")

DEADLOCKED = textwrap.dedent("""\
    import ctypes

    import torch


    class DeadlockedAdagrad(torch.optim.Adagrad):
        '''Deadlocks in C (the GIL released) on every input.'''

        def step(self, closure=None):
            libc = ctypes.CDLL(None)
            mutex = ctypes.create_string_buffer(64)
            libc.pthread_mutex_lock(mutex)
            libc.pthread_mutex_lock(mutex)
""")


def _torch_optimizers_used() -> None:
    """torch's own first use of a sparse Adagrad step (its modules imported lazily: seconds on a loaded
    machine) made in this process, so that a run in it with a short timeout gives its candidate's first
    call (limit: 5 x the timeout) only the candidate's own cost to pay."""
    import torch

    param = torch.zeros(2, requires_grad=True)
    param.grad = torch.sparse_coo_tensor([[0]], [1.0], (2,), check_invariants=True)
    torch.optim.Adagrad([param]).step()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# ------------------------------------------------------------------ the circuit breaker (in process)

def _breaker_run(tmp_path, name: str, source: str, candidate: str, timeout: float) -> tuple[int, dict, dict]:
    """The small spec in this process with ``candidate`` (written from ``source``) and a breaker of 2:
    (exit code, the results document, its records by case), the run checked to have been stopped
    after the first two items."""
    (tmp_path / f"{name}.py").write_text(source)
    code, path = run_inprocess(name, str(SMALL_SPEC), "--conformance-examples", "0",
                               "--conformance-impl", f"adagrad={tmp_path / f'{name}.py'}:{candidate}",
                               "--conformance-max-crashes", "2", timeout=timeout)
    document = load(path)
    assert code == pytest.ExitCode.INTERRUPTED and document["run"]["status"] == "interrupted"
    records = by_case(document)
    assert sorted(records) == ["before[candidate-cpu-float64]", "misbehave-here[candidate-cpu-float64]"], records
    return code, document, records


@pytest.mark.slow  # about 2-3.5 s: the fast tier stays within its 90 s (95.8 s on 2026-11-28)
def test_the_breaker_stops_a_run_whose_candidate_hangs_on_every_input(tmp_path):
    _torch_optimizers_used()
    code, document, records = _breaker_run(tmp_path, "breaker-trips", SLEEPY, "SleepyAdagrad", 0.5)
    assert all("from pytest-timeout" in r["message"] for r in records.values())
    assert document["run"]["not_run"] == [f"{SMALL_SPEC.relative_to(REPO)}::after[candidate-cpu-float64]"]
    # check's verdict on such a file
    verdict = check.judge(document, run_id=document["run"]["id"], status=int(code), ops=["adagrad"])
    assert verdict.code == check.FAIL and "crashed or hung on every input tried (2 item(s)" in verdict.reason


@pytest.mark.slow
def test_a_candidate_whose_first_call_hangs_stops_the_run_at_the_first_calls_limit(tmp_path):
    """Its first call (made before any item, in the thread the items run in) is stopped at its limit
    (5 x 0.2 s): the items of candidate/adagrad are errors at once, not run (each would cost its timeout
    and a worker for the same hang); the breaker counts them, and check's verdict is FAIL. Before, each
    item ran and timed out in turn (at check's defaults a deadlock in C cost 9 min 44 s to 10 min 36 s: five minutes of first calls, then
    each item's timeout and a new worker)."""
    code, document, records = _breaker_run(tmp_path, "first-call-hangs", STUCK, "StuckAdagrad", 0.2)
    for record in records.values():
        assert record["outcome"] == "error" and record["timed_out"] is True, record
        assert record["message"].startswith("not run: candidate's first call of adagrad"), record["message"]
        assert "(its limit: 1 s) and was stopped there" in record["message"], record["message"]
    verdict = check.judge(document, run_id=document["run"]["id"], status=int(code), ops=["adagrad"])
    assert verdict.code == check.FAIL and "crashed or hung on every input tried (2 item(s)" in verdict.reason


def test_the_candidates_first_call_limit_comes_from_checks_import_probe(monkeypatch):
    """Built-in backends: 5 item timeouts. The candidate under check: 5 times what its import took in
    check's probe, and at least one item's timeout; without check's measure, the built-ins' limit."""
    from types import SimpleNamespace

    from conformance.run.plugin import CANDIDATE_IMPORT_SECONDS, first_call_limit

    config = SimpleNamespace(getoption=lambda name, default=None: {"conformance_timeout": 60.0}.get(name, default))
    candidate, builtin = SimpleNamespace(name="candidate"), SimpleNamespace(name="coo")
    monkeypatch.delenv(CANDIDATE_IMPORT_SECONDS, raising=False)
    assert first_call_limit(config, candidate) == first_call_limit(config, builtin) == 300
    for measured, limit in (("8.5", 60), ("30", 150), ("nan", 300), ("-1", 300), ("inf", 300), ("x", 300)):
        monkeypatch.setenv(CANDIDATE_IMPORT_SECONDS, measured)
        assert (first_call_limit(config, candidate), first_call_limit(config, builtin)) == (limit, 300), measured
    assert check.CANDIDATE_IMPORT_SECONDS == CANDIDATE_IMPORT_SECONDS  # check names it, the run reads it
    assert check._import_measure(8.25) == {CANDIDATE_IMPORT_SECONDS: "8.250"} and check._import_measure(None) == {}


def test_a_plain_run_says_where_a_slow_candidate_import_stands_past_its_first_call_limit(tmp_path, monkeypatch, capfd):
    """Issue 52 (F2): pytest waits for an import for ever (check and replay bound it, --import-timeout); a
    plain run says so past the candidate's first-call limit (5 x 0.05 s here), and where the import stands."""
    from conformance.run.plugin import CANDIDATE_IMPORT_SECONDS

    monkeypatch.delenv(CANDIDATE_IMPORT_SECONDS, raising=False)
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(1.0)\ndef x(t):\n    return t.coalesce()\n")
    target = f"coalesce={tmp_path / 'slow_import.py'}:x"
    code, _ = run_inprocess("slow-import", str(REPO / "specs" / "coalesce.yaml"), "--collect-only",
                            "--conformance-examples", "0", "--conformance-impl", target, timeout=0.05)
    err = capfd.readouterr().err
    assert code == 0, err[-2000:]
    assert f"importing the candidate ({target}) has not returned after 0.25 s, its first-call limit" in err, err[-2000:]
    assert "time.sleep(1.0)" in err


@pytest.mark.slow  # a generous timeout: the item before the hang must pass within it on a loaded machine
def test_the_breaker_is_off_once_a_candidate_item_gave_a_result():
    code, path = run_inprocess("breaker-off", str(SMALL_SPEC), "--conformance-examples", "0",
                               "--conformance-impl", "adagrad=tests/candidates/robustness.py:HangingAdagrad",
                               "--conformance-max-crashes", "1", timeout=15)
    document = load(path)
    assert code == pytest.ExitCode.TESTS_FAILED and document["run"]["status"] == "complete"
    outcomes = {case: r["outcome"] for case, r in by_case(document).items()}
    assert outcomes == {"before[candidate-cpu-float64]": "passed", "misbehave-here[candidate-cpu-float64]": "error",
                        "after[candidate-cpu-float64]": "passed"}


def test_check_asks_for_the_breaker_and_a_bad_count_is_a_usage_error():
    from conformance.core.target import CandidateTarget

    command = check.pytest_command([CandidateTarget.parse("adagrad=m:A")], results=Path("r.json"))
    assert command[command.index("--conformance-max-crashes") + 1] == str(check.DEFAULT_MAX_CRASHES) == "5"
    with pytest.raises(SystemExit) as exited:
        check.build_parser().parse_args(["adagrad=m:A", "--max-crashes", "-1"])
    assert exited.value.code == check.USAGE
    with pytest.raises(SystemExit) as exited:
        check.build_parser().parse_args(["adagrad=m:A", "--run-timeout", "nan"])
    assert exited.value.code == check.USAGE


# ------------------------------------------------------------------ child processes: slow tier

@pytest.mark.slow
def test_a_native_hang_in_a_run_in_one_process_ends_it_with_the_item_in_the_results(tmp_path):
    results = tmp_path / "results.json"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", *base_args(results), str(SMALL_SPEC), "-p", "no:xdist",
                           "--conformance-examples", "0", "--conformance-timeout", "5",
                           "--conformance-impl", f"adagrad={FAULTS}:NativeDeadlockAdagrad", "-k", "candidate"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert time.monotonic() - started < 5 + 10 + 120  # timeout + grace + the start of a loaded machine
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    document = load(results)
    assert document["run"]["status"] == "interrupted" and document["run"]["exit_status"] == 2
    records = by_case(document)
    hung = records["misbehave-here[candidate-cpu-float64]"]
    assert hung["outcome"] == "error" and hung["timed_out"] is True and hung["crashed"] is True
    assert hung["message"].startswith("timed out in native code") and "ended the run here" in hung["message"]
    assert "faults.py" in hung["message"]  # the item's stack, where it hung
    assert records["before[candidate-cpu-float64]"]["outcome"] == "passed"
    assert document["run"]["not_run"] == [f"{SMALL_SPEC.relative_to(REPO)}::after[candidate-cpu-float64]"]
    assert "misbehave-here[candidate-cpu-float64] timed out in native code" in proc.stderr


def _plain_run(tmp_path: Path, candidate: str) -> tuple[subprocess.CompletedProcess, dict, float]:
    results = tmp_path / "results.json"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", *base_args(results), str(SMALL_SPEC), "-p", "no:xdist",
                           "--conformance-examples", "0", "--conformance-timeout", "5",
                           "--conformance-impl", f"adagrad={candidate}", "-k", "candidate"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - started
    deadline = time.monotonic() + 10  # the run's sidecar writes a few milliseconds after the run's process ended
    while load(results)["run"]["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc, load(results), elapsed


@pytest.mark.slow
def test_a_hang_holding_the_gil_in_a_run_in_one_process_ends_it_with_the_item_in_the_results(tmp_path):
    """No Python thread can run: faulthandler's watchdog ends the process, with the tracebacks, and
    the run's sidecar process writes the item's record."""
    proc, document, elapsed = _plain_run(tmp_path, f"{FAULTS}:GilHoldingAdagrad")
    assert elapsed < 5 + 2 * 10 + 120
    assert proc.returncode != 0 and "Timeout (0:00:25)!" in proc.stderr, proc.stderr[-3000:]
    assert document["run"]["status"] == "interrupted"
    records = by_case(document)
    hung = records["misbehave-here[candidate-cpu-float64]"]
    assert hung["outcome"] == "error" and hung["timed_out"] is True
    assert hung["message"].startswith("timed out in native code") and "holding the GIL" in hung["message"]
    assert records["before[candidate-cpu-float64]"]["outcome"] == "passed"  # though written after the last write
    assert document["run"]["not_run"] == [f"{SMALL_SPEC.relative_to(REPO)}::after[candidate-cpu-float64]"]


@pytest.mark.slow
def test_a_crash_in_a_run_in_one_process_is_recorded_too(tmp_path):
    proc, document, _ = _plain_run(tmp_path, "tests/candidates/robustness.py:SegfaultingAdagrad")
    assert proc.returncode == -signal.SIGSEGV or proc.returncode == 128 + signal.SIGSEGV, proc.returncode
    assert document["run"]["status"] == "interrupted"
    crashed = by_case(document)["misbehave-here[candidate-cpu-float64]"]
    assert crashed["outcome"] == "error" and crashed["crashed"] and "the process ended while running" in crashed["message"]


@pytest.mark.slow  # about 10 s each
@pytest.mark.parametrize("candidate, processes", [("coalesce_fork_returns", "1"), ("coalesce_fork_hangs", "1"),
                                                  ("coalesce_fork_hangs", "0")])
def test_a_forking_candidate_leaves_no_copy_of_the_worker_and_reports_each_item_once(tmp_path, candidate, processes):
    """issue 52, F14: a candidate that forks and whose child does not exit, in a plain ``pytest -n 1``
    run (and in one process). A child back in the harness ends there (it would run and report the item again); one that
    hangs is killed when its worker ends. Before: copies of the worker left running, PPID 1."""
    forks, results = tmp_path / "forks", tmp_path / "results.json"
    forks.mkdir()
    with open(tmp_path / "out.txt", "w") as out:  # not a pipe: a copy left running would hold it open
        code = subprocess.call([sys.executable, "-m", "pytest", *base_args(results), "specs/coalesce.yaml", "-n", processes,
                                "-k", "basic-2x3", "--conformance-examples", "0", "--conformance-backend", "candidate,coo",
                                "--conformance-impl", f"coalesce=tests/candidates/forks.py:{candidate}"],
                               cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=300,
                               env={**os.environ, "CONFORMANCE_TEST_FORKS": str(forks)})
    children = [int(path.name) for path in forks.iterdir()]
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in children if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    output = (tmp_path / "out.txt").read_text()
    assert len(children) >= 2 and not left, (children, left, output[-3000:])
    assert code == 0 and "4 passed" in output and "failed" not in output, output[-3000:]
    assert sorted(r["outcome"] for r in load(results)["records"] if r["case"] == "basic-2x3") == ["passed"] * 4


@pytest.mark.slow
def test_run_pytest_has_a_timeout_and_leaves_no_process_of_its_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    child = textwrap.dedent(f"""\
        import subprocess, sys, time
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pid_file)!r}, "w").write(str(grandchild.pid))
        time.sleep(600)
    """)
    started = time.monotonic()
    status, received = check._run_within([sys.executable, "-c", child], 3)
    assert time.monotonic() - started < 30
    assert received == check.RUN_TIMEOUT and status == -signal.SIGTERM
    deadline = time.monotonic() + 10
    while _alive(int(pid_file.read_text())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(int(pid_file.read_text())), "the child's own child outlived check"


@pytest.mark.slow
def test_check_stops_early_when_the_candidate_deadlocks_on_every_input(tmp_path):
    (tmp_path / "deadlocked.py").write_text(DEADLOCKED)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "conformance", "check", f"adagrad={tmp_path / 'deadlocked.py'}:DeadlockedAdagrad",
                           "--specs", str(SMALL_SPEC), "--results", str(tmp_path / "candidate.json"),
                           "--report", str(tmp_path / "check.html"), "--workers", "1", "--max-crashes", "2",
                           "--pytest-args", "--conformance-examples 0 --conformance-timeout 5"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - started
    output = proc.stdout + proc.stderr
    assert proc.returncode == check.FAIL, output[-3000:]
    assert "its first 2 items in a row, and none passed (--conformance-max-crashes 2)" in output, output[-3000:]
    # the verdict counts every item that crashed or hung: the two that stopped the run, and any the
    # worker had started before the stop reached it (a third, on a loaded machine)
    counted = re.search(r"crashed or hung on every input tried \((\d+) item\(s\), none passed\)", output)
    assert counted and int(counted.group(1)) >= 2, output[-3000:]
    # two items' timeout + grace and a worker's restart, not every item's: a few minutes at most
    assert elapsed < 2 * (5 + 10) + 240, elapsed


@pytest.mark.acceptance  # check at its defaults: 60 s items, the suite's specs, minutes each
@pytest.mark.parametrize("source, name", [(DEADLOCKED, "DeadlockedAdagrad"), (GIL_HELD, "GilHeldAdagrad")],
                         ids=["deadlock-gil-released", "spin-gil-held"])
def test_check_at_its_defaults_fails_a_candidate_that_hangs_on_every_input_within_three_minutes(tmp_path, source,
                                                                                                name):
    """issue 30, point 3: the suite's specs, 100 examples, 60 s items, one worker per core. The
    candidate's first call hangs in every worker; its limit is 5 x the import probe's time, at least
    60 s (stuck in C, the GIL released or held: the watchdog ends the worker at the limit + its grace,
    and the replacement runs none of candidate/adagrad). Before: 9 min 44 s to
    10 min 36 s (docs/robustness.md)."""
    (tmp_path / "hangs.py").write_text(source)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "conformance", "check", f"adagrad={tmp_path / 'hangs.py'}:{name}",
                           "--results", str(tmp_path / "candidate.json"), "--report", str(tmp_path / "check.html")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - started
    output = proc.stdout + proc.stderr
    assert proc.returncode == check.FAIL, output[-3000:]
    # at least the breaker's 5: the other worker records the items it had started when the run stopped
    tried = re.search(r"crashed or hung on every input tried \((\d+) item\(s\), none passed\)", output)
    assert "RESULT: FAIL" in output and tried and int(tried.group(1)) >= 5, output[-3000:]
    records = load(tmp_path / "candidate.json")["records"]
    assert any("first call of adagrad" in str(r.get("message")) for r in records if r["backend"] == "candidate")
    assert elapsed < 180 + 60, elapsed  # three minutes, and a margin for a loaded machine


# ------------------------------------------------------------------ a hang inside a generated example

HANGS_ON_MATRICES = textwrap.dedent("""\
    import time

    import torch


    class HangsOnMatricesAdagrad(torch.optim.Adagrad):
        '''torch's Adagrad, except that a step with a parameter of 6 or more entries sleeps past any
        short timeout (its first call, on a smaller parameter, returns).'''

        def step(self, closure=None):
            if any(p.numel() >= 6 for group in self.param_groups for p in group["params"]):
                time.sleep(60)
            return super().step(closure)
""")


@pytest.mark.slow  # a 10 s timeout waited out, in process
def test_a_timeout_inside_a_generated_example_names_the_example_and_saves_it_for_replay(tmp_path):
    """pytest-timeout's timeout fires inside one drawn example: the item is an error whose message says
    so and shows that example in spec notation, and the example is saved (replay runs it first)."""
    (tmp_path / "hangs.py").write_text(HANGS_ON_MATRICES)
    counterexamples = tmp_path / "counterexamples"
    code, path = run_inprocess("generated_timeout", "specs", "-n", "0", "--conformance-backend", "candidate",
                               "--conformance-op", "adagrad", "-k", "agrees-with-reference and float32",
                               # no budget: under load, half the timeout ran out before the hanging example was drawn
                               "--conformance-examples", "25", "--conformance-budget", "0",
                               f"--conformance-counterexamples={counterexamples}",
                               "--conformance-impl", f"adagrad={tmp_path / 'hangs.py'}:HangsOnMatricesAdagrad",
                               timeout=10)
    records = load(path)["records"]
    assert code == pytest.ExitCode.TESTS_FAILED and [r["outcome"] for r in records] == ["error"], records
    message = records[0]["message"]
    assert message.startswith("Timeout (>10.0s) from pytest-timeout."), message  # what the breaker counts
    assert "the timeout fired inside an example" in message, message
    shown = message.split("the example that was running (spec notation):", 1)[1]
    params = re.search(r"param: (\[.*?\])\n    \w", shown, re.S)
    assert params is not None, message
    entries = torch.tensor(eval(params.group(1).replace("\n", " ")))  # noqa: S307 - the spec notation's list
    assert entries.numel() >= 6, entries  # the example shown is one that hangs
    replay = message.split("replay (runs this example first): ", 1)[1].splitlines()[0]
    assert replay.startswith("python -m conformance replay") and replay.endswith("--timeout 10"), replay
    assert list((counterexamples / ".failing").iterdir()), "the example was not saved for replay"


def test_a_timeout_hypothesis_wrapped_in_a_flaky_failure_is_the_items_timeout_not_a_nondeterministic_backend():
    """A timeout that fires while Hypothesis draws an example, or in an example it then runs again, reaches
    the search inside a FlakyFailure, wrapped (it is a BaseException): it is the item's timeout (an error
    the breaker counts), never "the backend is nondeterministic" (a failure of the candidate's)."""
    timeout = pytest.fail.Exception("Timeout (>6.0s) from pytest-timeout.")
    drawing = FlakyFailure("flaky", [timeout, ValueError("the replay's own error")])
    assert _timeout_in(drawing) is timeout
    in_example = ExampleTimedOut(timeout, example={"param": [1.0]})
    assert _timeout_in(FlakyFailure("flaky", [ValueError("x"), in_example])) is in_example
    assert _timeout_in(FlakyFailure("flaky", [ValueError("a real nondeterministic failure")])) is None
    unwrapped = BaseExceptionGroup("flaky", [timeout])  # holding the timeout as it is, not wrapped: found too
    assert _timeout_in(unwrapped) is timeout
