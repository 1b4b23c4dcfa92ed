"""The generated (Hypothesis) cases, end to end: pytest is run (in this process, see run_pytest)
on ``specs`` with ``--conformance-impl`` for each single-slip mutant in tests/candidates/mutants.py,
and must flag it, write a counterexample spec that ``load_spec`` accepts (golden values from the
NumPy reference; shrunk in one round, first-failing under --conformance-no-shrink in the others)
and a script that reproduces the failure (torch's own implementations passing is
tests/test_verdict.py's test_stock_torch_passes_its_own_gate).

Run with ``python -m pytest tests`` from the repository root so that this checkout's
``conformance`` package is the one imported.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.core.target import CandidateTarget
from conformance.specs.load import load_spec
from conformance_runs import NO_GC_AT_EXIT, replay_here

REPO = Path(__file__).resolve().parents[1]
MUTANTS = "tests/candidates/mutants.py"


@contextlib.contextmanager
def as_a_subprocess(cwd: Path, env: dict | None = None):
    """Run code in this process as a child process would see it: its own working directory and
    environment (restored afterwards); yields the buffer its stdout and stderr go to."""
    saved_env, saved_cwd, output = dict(os.environ), os.getcwd(), io.StringIO()
    os.environ.clear()
    os.environ.update({**clean_env(saved_env), **(env or {})})
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            yield output
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def run_pytest(args: list[str], cwd: Path = REPO, records: Path | None = None,
               env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m pytest ARGS`` in this process (torch is imported once), as a subprocess would see
    it (:func:`as_a_subprocess`), its output captured."""
    env = dict(env or {})
    if records is not None:
        env["CONFORMANCE_RECORDS"] = str(records)
        if not any(arg.startswith("--conformance-counterexamples") for arg in args):  # not into the checkout
            args = [*args, f"--conformance-counterexamples={records.parent / 'counterexamples'}"]
    with as_a_subprocess(cwd, env) as output:
        code = pytest.main(["-p", "no:cacheprovider", "-p", "tests.record_dump", "-o", "addopts=",
                            *NO_GC_AT_EXIT, *args])
    return subprocess.CompletedProcess(args, int(code), output.getvalue(), "")


def run_replay(command: str, monkeypatch) -> subprocess.CompletedProcess:
    """A printed ``python -m conformance replay ...`` command, from the repository, in this process:
    its ``main(argv)``, and the pytest it starts as ``pytest.main`` (the same command across the
    process boundary, from a user's directory and a wheel: tests/test_wheel.py)."""
    from conformance.entry_points.cli import main as cli_main

    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "conformance"], command

    with monkeypatch.context() as patch, as_a_subprocess(REPO) as output:
        replay_here(patch)
        code = cli_main(argv[3:])
    return subprocess.CompletedProcess(argv, code, output.getvalue(), "")


def clean_env(environ) -> dict:
    return {k: v for k, v in environ.items() if k not in ("HYPOTHESIS_PROFILE", "CONFORMANCE_HYPOTHESIS_PROFILE",
                                                          "CONFORMANCE_GENERATED_SEED")}


def read_records(path: Path) -> dict[str, dict]:
    """nodeid -> the conformance record (with its outcome) the plugin attached to the item's report."""
    return json.loads(path.read_text())


def run_generated(tmp_path: Path, impls: dict[str, str], *extra: str) -> tuple[subprocess.CompletedProcess, dict, Path]:
    records = tmp_path / "records.json"
    counterexamples = tmp_path / "counterexamples"
    # a generous per-item timeout: these runs share the machine with the rest of the test command
    args = ["specs", "-q", "-k", "generated", "--conformance-device", "cpu", "--conformance-timeout", "600",
            f"--conformance-counterexamples={counterexamples}",
            *(f"--conformance-impl={op}={target}" for op, target in impls.items()), *extra]
    proc = run_pytest(args, records=records)
    assert records.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, read_records(records), counterexamples


# one mutant per op in each round, so that one pytest run checks four of them
ROUNDS = [
    {"adagrad": "EpsInsideSqrtAdagrad", "sparse_adam": "PerRowBiasCorrectionSparseAdam",
     "masked_mean": "nansum_masked_mean", "coalesce": "column_major_coalesce"},
    {"adagrad": "NoMaximizeAdagrad", "sparse_adam": "PerRowStepSparseAdam",
     "masked_mean": "leaky_grad_masked_mean", "coalesce": "last_write_wins_coalesce"},
    {"adagrad": "LrDecayOffByOneAdagrad", "sparse_adam": "AdamEpsSparseAdam",
     "masked_mean": "numel_masked_mean", "coalesce": "dropping_coalesce"},
    {"adagrad": "SquareBeforeSumAdagrad", "sparse_adam": "DenseMomentsSparseAdam",
     "masked_mean": "multiply_masked_mean", "coalesce": "raising_coalesce"},
    {"sparse_adam": "NoMaximizeSparseAdam"},
]
EXPECTED_OUTCOME = {"raising_coalesce": "error"}


# the last round shrinks its counterexamples (the default); the others report the first failing
# example as drawn (--conformance-no-shrink): the same verdict, without shrinking's many reruns
SHRUNK_ROUND = ROUNDS[-1]


@pytest.mark.parametrize("mutants", ROUNDS, ids=lambda r: "+".join(r.values()))
@pytest.mark.slow
def test_single_slip_mutants_are_flagged_with_a_counterexample_spec(tmp_path, monkeypatch, mutants):
    from conformance.cases import counterexamples

    # no time for the notes on the other built-in backends (each counterexample tried up to 15 s of
    # them, the Triton kernels interpreted on cpu among them: 60% of a round); their budget and what
    # they run are tested on their own (test_the_notes_on_other_backends_stop_at_their_budget)
    monkeypatch.setattr(counterexamples, "NOTES_BUDGET", 0.0)
    shrink = [] if mutants is SHRUNK_ROUND else ["--conformance-no-shrink"]
    proc, records, counterexamples = run_generated(
        tmp_path, {op: f"{MUTANTS}:{name}" for op, name in mutants.items()}, "--conformance-dtype", "float64",
        *shrink)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-4000:]
    if shrink:
        assert "failure on the first failing (not shrunk) example:" in output
        assert " --no-shrink" in output.split("replay: ", 1)[1].splitlines()[0]
    else:
        assert "failure on the shrunk example:" in output and "not shrunk" not in output
    for op, mutant in mutants.items():
        mine = {name: r for name, r in records.items() if r["op"] == op}
        assert mine, f"no generated items for {op}"
        flagged = {name: r for name, r in mine.items() if r["outcome"] == EXPECTED_OUTCOME.get(mutant, "failed")}
        assert flagged, f"{mutant} was not flagged: {[(n, r['outcome']) for n, r in mine.items()]}"
        for name, record in flagged.items():
            spec_path = Path(record["counterexample"])
            assert spec_path.parent == counterexamples and spec_path.name.startswith(record["case"])
            if spec_path.name.endswith(".notes.txt"):  # a lifecycle: no spec case holds it yet; the script does
                assert record["case"].endswith("-lifecycle") and "lifecycle" in spec_path.read_text()
            else:
                spec = load_spec(spec_path)  # raises SpecError if the written spec is not valid
                assert spec.op.name == op
                for case in spec.cases:
                    assert case.source["key"] == "numpy-reference"
                    assert "NumPy float64 reference" in case.derivation
                    assert "not by the code under test" in case.derivation
                    assert case.expected is not None or case.expected_error is not None
            script = Path(record["counterexample_script"])
            with pytest.raises(SystemExit) as exited:
                runpy.run_path(str(script), run_name="__main__")
            assert exited.value.code == 1, f"{script} does not reproduce the failure of {mutant}"
            if record["case"] not in REPLAYED:  # each property's printed replay, once: it fails again
                REPLAYED.add(record["case"])
                replayed = run_replay(record["rerun"], monkeypatch)
                assert replayed.returncode == 1, f"{record['rerun']}\n{replayed.stdout[-3000:]}{replayed.stderr[-2000:]}"
                assert "the saved failing example, run first: still fails" in replayed.stdout, replayed.stdout[-3000:]
        assert "replay: python -m conformance replay 'specs::generated::" in output and "--seed 0" in output


REPLAYED: set[str] = set()  # the properties whose printed replay a mutant round has run


@pytest.mark.slow
def test_clean_reimplementations_pass(tmp_path):
    """The mutants' common base classes are correct, so each mutant's failure is its one slip."""
    impls = {"adagrad": f"{MUTANTS}:CleanAdagrad", "sparse_adam": f"{MUTANTS}:CleanSparseAdam",
             "coalesce": f"{MUTANTS}:torch_coalesce", "masked_mean": f"{MUTANTS}:where_masked_mean"}
    proc, records, _ = run_generated(tmp_path, impls, "--conformance-dtype", "float32,float64")
    # (complex-agrees, grad-scaling: unsupported, the classes do not declare supports_complex/supports_grad_scaling)
    from conformance.cases.properties import opted_out

    bad = {name: r["outcome"] for name, r in records.items() if r["outcome"] not in ("passed", "xfail")
           and not opted_out(r)}
    assert records and not bad, f"{bad}\n{(proc.stdout + proc.stderr)[-6000:]}"


@pytest.mark.slow
def test_generated_items_are_collected_by_default_with_readable_ids():
    proc = run_pytest(["specs", "--collect-only", "-q", "--conformance-backend", "coo,dense,masked,reference"])
    ids = proc.stdout.splitlines()
    assert "specs::generated::coalesce-agrees-with-reference[coo-cpu-float32]" in ids
    assert "specs::generated::sparse_adam-unspecified-unchanged[masked-cpu-float16]" in ids
    assert "specs::generated::masked_mean-ignores-masked-out[dense-cpu-bfloat16]" in ids
    assert any(i.startswith("specs/adagrad.yaml::") for i in ids)  # the hand-written cases are still there
    assert not any("agrees-with-reference[reference-" in i for i in ids)  # no tautologies
    off = run_pytest(["specs", "--collect-only", "-q", "--conformance-examples", "0", "--conformance-op", "adagrad"])
    assert not [i for i in off.stdout.splitlines() if "::generated::" in i]
    assert any(i.startswith("specs/adagrad.yaml::") for i in off.stdout.splitlines())


def test_profiles_and_database_stay_out_of_the_repository(tmp_path):
    """A project with only a specs/ directory: the thorough profile keeps its example database
    under reports/, Hypothesis writes no .hypothesis/ in the project root, the header names the
    profile and seed, and --conformance-seed fixes the seed."""
    (tmp_path / "specs").mkdir()
    args = [str(tmp_path / "specs"), "--conformance-device", "cpu", "--conformance-dtype", "float64",
            "--conformance-backend", "dense", "--conformance-op", "coalesce", "--conformance-examples", "3",
            "--rootdir", str(tmp_path), "-p", "no:randomly"]
    records = tmp_path / "records.json"
    proc = run_pytest([*args, "--conformance-hypothesis-profile", "thorough", "--conformance-seed", "1234"],
                      cwd=tmp_path, records=records)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "profile thorough, 3 examples per item, seed 1234" in output
    assert "6 passed" in output  # coalesce's six properties on the dense backend (layout-invariant, complex-agrees, sizes among them)
    assert not (tmp_path / ".hypothesis").exists()
    records = read_records(records).values()
    assert {r["hypothesis_database"] for r in records} == {str(tmp_path / "reports" / "hypothesis" / "examples")}
    assert {(r["profile"], r["seed"], r["examples"] >= 3) for r in records} == {("thorough", 1234, True)}
    ci = run_pytest([*args, "--conformance-no-shrink"], cwd=tmp_path)
    assert "profile ci, 3 examples per item, seed 0" in ci.stdout + ci.stderr
    assert "failing examples not shrunk (--conformance-no-shrink)" in ci.stdout + ci.stderr


def test_profile_from_environment(tmp_path):
    (tmp_path / "specs").mkdir()
    proc = run_pytest([str(tmp_path / "specs"), "--conformance", "--collect-only", "--rootdir", str(tmp_path)], cwd=tmp_path,
                      env={"HYPOTHESIS_PROFILE": "thorough"})
    assert "conformance generated cases: profile thorough, 300 examples per item" in proc.stdout, proc.stdout[-2000:]


def test_unavailable_device_items_are_skipped_with_the_reason(tmp_path):
    """Without --conformance-device the cuda items exist too; on a machine without CUDA they are
    skipped with the reason (not an internal error), and the cpu ones run."""
    records = tmp_path / "records.json"
    proc = run_pytest(["specs", "-q", "-k", "generated and coalesce-idempotent", "--conformance-backend", "dense",
                       "--conformance-dtype", "float32"], records=records)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "INTERNALERROR" not in output, output[-3000:]
    outcomes = {nodeid.rsplit("[", 1)[1]: r["outcome"] for nodeid, r in read_records(records).items()}
    assert outcomes["dense-cpu-float32]"] == "passed"
    import torch

    assert outcomes["dense-cuda-float32]"] == ("passed" if torch.cuda.is_available() else "skipped")


@pytest.mark.slow
def test_generated_items_on_xla_are_opt_in(pytester, monkeypatch, warm_imports):
    """Where xla is available its generated items are skipped with the reason unless
    --conformance-generated-on-xla is given (every example's new shapes cost a compilation)."""
    import conformance.run.generated_plugin as plugin
    import conformance.run.items as items

    for module in (plugin, items):  # pretend xla is there
        monkeypatch.setattr(module, "unavailable_reason", lambda device: None)
    pytester.mkdir("specs")
    args = ["specs", "-p", "no:cacheprovider", "-rs", "--conformance-device", "xla", "--conformance-backend",
            "dense", "--conformance-op", "coalesce", "--conformance-dtype", "float32"]
    skipped = pytester.runpytest_inprocess(*args, *NO_GC_AT_EXIT)
    skipped.assert_outcomes(skipped=6)  # coalesce's six float32 properties on dense (layout-invariant, complex-agrees, sizes among them)
    skipped.stdout.fnmatch_lines(["*generated cases on xla are opt-in (--conformance-generated-on-xla)*"])
    opted_in = pytester.runpytest_inprocess(*args, *NO_GC_AT_EXIT, "--conformance-generated-on-xla", "--conformance-examples", "1")
    assert "opt-in" not in opted_in.stdout.str()
    assert opted_in.parseoutcomes().get("skipped", 0) == 0


def test_every_counterexample_script_is_python_that_compiles():
    """A counterexample script holds its example and calls the harness's own judging code
    (conformance.cases.reproduce): every property, as a candidate's and a built-in backend's
    script, renders, compiles and names what it judges; none carries a check of its own."""
    from conformance.backends import builtin_backends
    from conformance.cases.counterexamples import render_script
    from conformance.cases.properties import PROPERTIES
    from conformance.cases.reproduce import decode_example

    document = {"cases": [{"id": "c", "inputs": {"param": [1.0]}, "expected": {"values": [1.0]}}]}
    backends = builtin_backends()
    for prop in PROPERTIES:
        for backend, target in ((backends["coo"], "pkg:Impl"), (backends["dense"], None)):
            script = render_script(prop, backend, "cpu", "float32", document, {"an": "example"}, impl_target=target,
                                   replay="replay", spec_name=f"{prop.id}.yaml")
            code = compile(script, f"{prop.id}-{backend.name}.py", "exec")
            assert "from conformance.cases.reproduce import main" in script and "def " not in script
            namespace: dict = {}
            exec(code, namespace)  # not as __main__: defines EXAMPLE, judges nothing
            assert decode_example(namespace["EXAMPLE"]) == {"an": "example"}
            assert f"property_id={prop.id!r}" in script and f"impl={target!r}" in script


def test_every_outcome_of_a_generated_item_is_produced_on_purpose(tmp_path):
    """One run, each outcome a generated item can have, each from a known cause: passed (the dense
    masked mean), xfail (stock torch's float16 coalesce sums duplicates in half precision), unsupported
    (MaskedTensor has no coalesce), error (a candidate that raises), failed (a mutant masked mean),
    skipped (cuda on a machine without it). (xpass is a spec case's outcome only: a generated item
    has no expected failure to pass.)"""
    import torch

    records = tmp_path / "records.json"
    proc = run_pytest(["specs", "-q", "-k", "generated and (coalesce-rounds-correctly or masked_mean-agrees)",
                       "--conformance-backend", "dense,coo,masked,candidate", "--conformance-dtype", "float16",
                       "--conformance-device", "cpu,cuda", "--conformance-no-shrink",
                       f"--conformance-impl=coalesce={MUTANTS}:raising_coalesce",
                       f"--conformance-impl=masked_mean={MUTANTS}:nansum_masked_mean"], records=records)
    outcomes = {nodeid.split("::generated::", 1)[1]: r["outcome"] for nodeid, r in read_records(records).items()}
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert outcomes["masked_mean-agrees-with-reference[dense-cpu-float16]"] == "passed", outcomes
    assert outcomes["coalesce-rounds-correctly[coo-cpu-float16]"] == "xfail", outcomes
    assert outcomes["coalesce-rounds-correctly[masked-cpu-float16]"] == "unsupported", outcomes
    assert outcomes["coalesce-rounds-correctly[candidate-cpu-float16]"] == "error", outcomes
    assert outcomes["masked_mean-agrees-with-reference[candidate-cpu-float16]"] == "failed", outcomes
    if not torch.cuda.is_available():
        assert outcomes["coalesce-rounds-correctly[dense-cuda-float16]"] == "skipped", outcomes


# ---------------------------------------------------------------- drawn once, replayed per backend

def _ci_settings():
    from conformance.run.generated_plugin import GeneratedConfig

    return GeneratedConfig(profile="ci", examples=8, seed=0, seed_given=False, counterexamples=REPO / "unused",
                           database=None, impl_targets={}).hypothesis_settings()


def _property(prop_id: str):
    from conformance.cases.properties import PROPERTIES

    return next(p for p in PROPERTIES if p.id == prop_id)


def test_the_next_backend_replays_exactly_the_examples_hypothesis_draws_for_it(monkeypatch):
    import pickle

    from conformance.backends import builtin_backends
    from conformance.cases import search
    from conformance.cases.drawn import DrawnExamples

    drawn = DrawnExamples()
    prop, settings, backends = _property("adagrad-agrees-with-reference"), _ci_settings(), builtin_backends()
    key = drawn.key(prop, "float32", settings, 0)
    search.run_property(prop, backends["dense"], "cpu", "float32", settings=settings, base_seed=0, drawn=drawn)
    by_dense = drawn.runs.pop(key)  # forget it: coo's run below is Hypothesis's own
    by_coo = search.run_property(prop, backends["coo"], "cpu", "float32", settings=settings, base_seed=0, drawn=drawn)
    explicit = len(prop.examples("float32"))
    assert explicit and drawn.replayed == 0 and len(by_dense) == by_coo.examples == settings.max_examples + explicit
    assert pickle.dumps(drawn.runs[key]) == pickle.dumps(by_dense)  # the very examples dense was drawn
    replayed = search.run_property(prop, backends["coo"], "cpu", "float32", settings=settings, base_seed=0, drawn=drawn)
    assert drawn.replayed == 1
    assert (replayed.examples, replayed.failure, replayed.divergences) == (by_coo.examples, None, by_coo.divergences)


def test_a_backend_that_fails_a_replayed_example_gets_the_verdict_hypothesis_gives_it(monkeypatch):
    """The replay is thrown away at the first example that does not pass: the item runs under
    Hypothesis, which finds and shrinks the same counterexample as without any replay."""
    from conformance.backends import builtin_backends
    from conformance.backends.candidate import CandidateBackend, load_object
    from conformance.cases import search
    from conformance.cases.drawn import DrawnExamples

    prop, settings = _property("adagrad-agrees-with-reference"), _ci_settings()
    mutant = CandidateBackend("candidate", {"adagrad": load_object(CandidateTarget.parse(f"adagrad={REPO / MUTANTS}:EpsInsideSqrtAdagrad"))})
    results, first_failures = [], []
    for replay in (True, False):
        drawn = DrawnExamples()
        if replay:
            search.run_property(prop, builtin_backends()["coo"], "cpu", "float64", settings=settings, base_seed=0,
                                drawn=drawn, on_failure=lambda: first_failures.append("stock"))
            assert drawn.get(drawn.key(prop, "float64", settings, 0))  # kept: the mutant's run starts as a replay
        results.append(search.run_property(prop, mutant, "cpu", "float64", settings=settings, base_seed=0, drawn=drawn,
                                           on_failure=lambda: first_failures.append(replay)))
        assert drawn.replayed == 0
    with_replay, alone = results
    assert with_replay.failure is not None and alone.failure is not None
    assert first_failures == [True, False]  # the shrinking notice's call: once per failing search, not per failing example
    assert repr(with_replay.failing_example) == repr(alone.failing_example)


@pytest.mark.parametrize("op, mutant", [("coalesce", "column_major_coalesce"),
                                         ("coalesce", "last_write_wins_coalesce"),
                                         ("masked_mean", "nansum_masked_mean"),
                                         ("adagrad", "EpsInsideSqrtAdagrad"), ("adagrad", "SquareBeforeSumAdagrad"),
                                         ("adagrad", "LrDecayOffByOneAdagrad"), ("adagrad", "NoMaximizeAdagrad"),
                                         ("sparse_adam", "AdamEpsSparseAdam"),
                                         ("sparse_adam", "PerRowBiasCorrectionSparseAdam"),
                                         ("sparse_adam", "NoMaximizeSparseAdam")])
def test_an_ops_explicit_examples_find_its_known_mistakes_whatever_the_seed_draws(monkeypatch, op, mutant):
    """The record's explicit examples run before any draw: each seed fails the mutant on one of
    them (with a single drawn example, which alone finds these mutants in a few percent of seeds)."""
    from hypothesis import HealthCheck, Phase, settings

    from conformance.backends.candidate import CandidateBackend, load_object
    from conformance.cases import search
    from conformance.cases.drawn import DrawnExamples

    prop = _property(f"{op}-agrees-with-reference")
    explicit = [repr(example) for example in prop.examples("float64")]
    assert explicit
    one_draw = settings(max_examples=1, database=None, deadline=None, derandomize=False,
                        phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    backend = CandidateBackend("candidate", {op: load_object(CandidateTarget.parse(f"{op}={REPO / MUTANTS}:{mutant}"))})
    for seed in range(3):
        result = search.run_property(prop, backend, "cpu", "float64", settings=one_draw, base_seed=seed)
        assert result.failure is not None, (seed, result)
        assert repr(result.failing_example) in explicit


def test_examples_one_worker_drew_are_replayed_by_another_through_the_run_s_folder(tmp_path, monkeypatch):
    """Under pytest-xdist each worker is its own process: a clean run's examples are also kept as a
    file in the run's folder, and a worker that never drew them replays them from there; a file that
    cannot be read is no replay (Hypothesis draws)."""
    import pickle

    from conformance.backends import builtin_backends
    from conformance.cases import search
    from conformance.cases.drawn import DrawnExamples

    prop, settings, backends = _property("coalesce-idempotent"), _ci_settings(), builtin_backends()
    key = DrawnExamples.key(prop, "float32", settings, 0)
    first = DrawnExamples(directory=tmp_path)
    search.run_property(prop, backends["dense"], "cpu", "float32", settings=settings, base_seed=0, drawn=first)
    assert [path.suffix for path in tmp_path.iterdir()] == [".pickle"]
    other = DrawnExamples(directory=tmp_path)  # another worker: nothing in its memory
    result = search.run_property(prop, backends["coo"], "cpu", "float32", settings=settings, base_seed=0, drawn=other)
    assert other.replayed == 1 and result.failure is None
    assert result.examples == settings.max_examples + len(prop.examples("float32"))  # drawn + explicit
    assert pickle.dumps(other.runs[key]) == pickle.dumps(first.runs[key])
    next(tmp_path.iterdir()).write_bytes(b"half-writ")
    assert DrawnExamples(directory=tmp_path).get(key) is None


def test_a_saved_failing_example_that_is_not_an_example_of_the_item_is_not_run_and_says_why(tmp_path, capsys):
    """A replay's saved failing example of another op (or an older suite's input objects) is left out
    with a warning naming the file, as an unreadable one is: judged, it was the harness's own
    AttributeError as the item's error (a traceback), or a failure of the implementation ('still
    fails'); replay's last line says the saved example was not run, not that there was none."""
    from conformance.cases.counterexamples import failing_example_path, load_failing_example, save_failing_example
    from conformance.entry_points import replay

    prop = _property("coalesce-agrees-with-reference")
    item = "coalesce-agrees-with-reference[coo-cpu-float64]"
    example = prop.examples("float64")[0]
    save_failing_example(tmp_path, item, example)
    loaded, why = load_failing_example(tmp_path, item, prop, "float64")
    assert why is None and repr(loaded) == repr([example])
    for foreign in (42, _property("masked_mean-agrees-with-reference").examples("float64")[0]):
        save_failing_example(tmp_path, item, foreign)
        loaded, why = load_failing_example(tmp_path, item, prop, "float64")
        assert loaded == [] and "is not an example of coalesce-agrees-with-reference (AttributeError: " in why
        assert str(failing_example_path(tmp_path, item)) in why and why.endswith("; not run")
    failing_example_path(tmp_path, item).unlink()
    failing_example_path(tmp_path, item).mkdir()
    assert load_failing_example(tmp_path, item, prop, "float64") == (
        [], f"the saved failing example {failing_example_path(tmp_path, item)} is not a file; not run")
    results = tmp_path / "replay.json"
    results.write_text(json.dumps({"records": [{"spec": "generated", "outcome": "passed", "examples": 7}]}))
    assert replay._judged(replay.parse_item(f"specs::generated::{item}"), 0, results, tmp_path) == 0
    said = capsys.readouterr().out
    assert "was not run (the warning above says why)" in said and "no saved failing example" not in said


@pytest.mark.parametrize("raised", ["SystemExit(3)", "GeneratorExit", "BaseException('plain')",
                                    "KeyboardInterrupt('its own')"])
def test_a_base_exception_the_candidate_raises_inside_an_example_is_that_example_s_failure(tmp_path, raised):
    """Hypothesis stops at a BaseException that is not an Exception without shrinking or naming the
    example, and the diagnosis (which runs the candidate again) let it through: the item was an error
    'SystemExit: 3' with pytest's traceback and no example, no saved example, no replay. It is the
    example's failure, its cause the candidate's exception; the counterexample spec reproduces it."""
    from conformance.backends.candidate import CandidateBackend, load_object
    from conformance.cases import search
    from conformance.cases.counterexamples import write_counterexample
    from conformance.core.interrupts import SignalWatch

    (tmp_path / "raising.py").write_text(
        "import torch\n"
        "class Raising(torch.optim.Adagrad):\n"
        "    def step(self, closure=None):\n"
        f"        raise {raised}\n")
    backend = CandidateBackend("candidate", {"adagrad": load_object(CandidateTarget.parse(
        f"adagrad={tmp_path / 'raising.py'}:Raising"))})
    prop = _property("adagrad-agrees-with-reference")
    with SignalWatch():  # as while an item runs: a KeyboardInterrupt no SIGINT raised is the candidate's
        result = search.run_property(prop, backend, "cpu", "float64", settings=_ci_settings(), base_seed=0)
        written = write_counterexample(tmp_path, prop, backend, "cpu", "float64", result.failing_example,
                                       result.failure, seed=0, replay="replay")
    assert isinstance(result.failure, search.ImplementationRaised), result.failure
    name = raised.partition("(")[0]
    assert str(result.failure).startswith(f"the implementation raised {name}")
    assert type(result.failure.__cause__).__name__ == name and result.failing_example is not None
    assert written.reproduced and all(f"fails ({name}" in line for line in written.reproduced), written.reproduced
    # the counterexample script's judgement, outside any item (no SignalWatch of the run's): it still fails
    from conformance.cases import reproduce
    assert reproduce.main(property_id=prop.id, backend="candidate", device="cpu", dtype="float64",
                          impl=f"{tmp_path / 'raising.py'}:Raising", root=str(tmp_path),
                          example=reproduce.encode_example(result.failing_example)) == reproduce.FAILS


def test_a_keyboard_interrupt_is_the_run_s_unless_no_signal_raised_it():
    """Only while a SignalWatch is SIGINT's handler (an item running) can a candidate's own
    KeyboardInterrupt be told from a Ctrl-C; a real SIGINT then raises SignalInterrupt, the run's."""
    import signal

    from conformance.cases import search
    from conformance.core.interrupts import SignalInterrupt, SignalWatch

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        plain = KeyboardInterrupt()
        assert search.as_failure(plain) is plain  # no watch: a Ctrl-C, as far as anyone can tell
        with SignalWatch():
            assert isinstance(search.as_failure(KeyboardInterrupt("its own")), search.ImplementationRaised)
            with pytest.raises(SignalInterrupt) as raised:
                signal.raise_signal(signal.SIGINT)
            assert search.as_failure(raised.value) is raised.value
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a run started in the background: no SIGINT raises one
        with SignalWatch():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # left as it is
            assert isinstance(search.as_failure(KeyboardInterrupt("its own")), search.ImplementationRaised)
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.slow
def test_the_whole_suite_is_imported_before_anything_is_drawn():
    """Hypothesis draws literals of every local module in sys.modules (the suite itself in a clone
    or editable install): with every suite module imported at configure time, a module an earlier
    item imports lazily (counterexamples after a failure, the kernels for one backend) cannot change
    what later items draw, so -k, xdist and shards draw the same examples for the same seed."""
    import pkgutil
    import subprocess
    import sys

    import conformance

    names = sorted(m.name for m in pkgutil.walk_packages(conformance.__path__, "conformance.")
                   if not m.name.endswith("__main__"))
    probe = ("import sys, conformance.run.generated_plugin as g; before = set(sys.modules); "
             "g.import_the_whole_suite(); print('\\n'.join(sorted(m for m in sys.modules if m.startswith('conformance.'))))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert set(names) <= set(loaded), sorted(set(names) - set(loaded))
    assert "conformance.cases.counterexamples" in names and "conformance.kernels._triton" in names


# ---------------------------------------------------------------- Hypothesis' public API: seed and example database

def test_a_seeded_search_keeps_the_profile_s_example_database_one_key_per_item(monkeypatch):
    """The search seeds Hypothesis with its public ``@seed`` (which switches the database off in the
    settings it finds) and puts the profile's settings over it: a ``thorough``-like run saves a
    failing example under the item's key and the next run of that item reuses it first; another
    item's key sees nothing of it; and the same seed still draws the same examples."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.database import InMemoryExampleDatabase

    from conformance.backends import builtin_backends
    from conformance.cases import search
    from conformance.cases.drawn import DrawnExamples
    from conformance.cases.trial import Property
    from conformance.core.compare import Mismatch

    database = InMemoryExampleDatabase()
    thorough = settings(max_examples=20, database=database, deadline=None, suppress_health_check=list(HealthCheck),
                        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink], report_multiple_bugs=False)
    tried: list[str] = []

    def fails_with_duplicates(trial, example):
        tried.append(repr(example))
        if len({tuple(column) for column in example.indices.T.tolist()}) < example.indices.shape[1]:
            raise Mismatch("duplicates")

    strategy = _property("coalesce-agrees-with-reference").strategy  # no explicit examples: all drawn
    prop = Property("coalesce", "test-database", "a test property", strategy, fails_with_duplicates)
    coo = builtin_backends()["coo"]

    def run(key, seed, under=thorough):
        tried.clear()
        result = search.run_property(prop, coo, "cpu", "float64", settings=under, base_seed=seed, database_key=key)
        return result, list(tried)

    first, _ = run("item-a", seed=0)
    assert first.failure is not None
    saved = set(database.data)
    assert saved and all(key.startswith(b"item-a\x00") for key in saved), saved  # under the item's key
    again, tried_again = run("item-a", seed=1)  # another seed: the reuse phase runs the saved failure first
    assert again.failure is not None and tried_again[0] == repr(first.failing_example)
    alone = run("item-b", seed=1, under=settings(thorough, database=InMemoryExampleDatabase()))[1]
    assert run("item-b", seed=1)[1] == alone  # another item reuses nothing of item-a's
    ci = settings(thorough, database=None, phases=[Phase.explicit, Phase.generate])
    assert run("item-a", 5, ci)[1] == run("item-a", 5, ci)[1] != run("item-a", 6, ci)[1]  # seed -> examples


def test_the_notes_on_other_backends_stop_at_their_budget(monkeypatch):
    """A counterexample's notes (divergences other backends show, whether the committed spec flags
    them) are bounded: past the deadline the remaining backends are named as not tried, not run."""
    from conformance.backends import builtin_backends
    from conformance.cases import counterexamples

    prop = _property("adagrad-agrees-with-reference")
    example = prop.examples("float64")[0]
    backends = builtin_backends()
    tried = []
    trial = counterexamples.Trial

    def counted(op, backend, device, dtype):
        tried.append(backend.name)
        return trial(op, backend, device, dtype)

    monkeypatch.setattr(counterexamples, "Trial", counted)
    others = {name: backends[name] for name in ("dense", "masked")}
    _, notes = counterexamples._divergences_elsewhere(prop, example, "float64", backends["coo"], others,
                                                      deadline=0.0)  # long past
    assert tried == [] and notes == [f"not tried ({counterexamples.NOTES_BUDGET:g} s for these notes ran out): "
                                     "dense, masked"]
    _, notes = counterexamples._divergences_elsewhere(prop, example, "float64", backends["coo"], others)
    assert tried == ["dense", "masked"] and notes == []  # no deadline: both tried (both have the property)


@pytest.mark.slow  # two in-process runs of Triton's interpreter: ~2 s
def test_an_emulating_backend_draws_fewer_examples_unless_the_count_is_named(tmp_path):
    """kernel-triton on cpu runs Triton's interpreter: its generated items draw INTERPRETED_EXAMPLES
    (beside the op's explicit examples), and the record says so; --conformance-examples lifts the cap;
    the C++ kernel backend, running natively, draws the run's count."""
    from conformance.backends.kernel import INTERPRETED_EXAMPLES

    def drawn(*extra: str) -> dict[str, dict]:
        records = tmp_path / f"records{len(extra)}.json"
        proc = run_pytest(["specs", "-q", "-k", "generated and coalesce-idempotent", "--conformance-device", "cpu",
                           "--conformance-backend", "kernel,kernel-triton", "--conformance-dtype", "float64",
                           *extra], records=records)
        assert proc.returncode == 0, proc.stdout[-3000:]
        return {nodeid.split("[", 1)[1].split("-cpu")[0]: r for nodeid, r in read_records(records).items()}

    capped = drawn()
    explicit = len(_property("coalesce-idempotent").examples("float64"))
    assert capped["kernel-triton"]["examples"] <= explicit + INTERPRETED_EXAMPLES < capped["kernel"]["examples"]
    assert "kernel-triton emulates cpu" in capped["kernel-triton"]["examples_capped"]
    assert "examples_capped" not in capped["kernel"]
    named = drawn("--conformance-examples", "8")
    assert named["kernel-triton"]["examples"] == named["kernel"]["examples"] == capped["kernel"]["examples"]
    assert "examples_capped" not in named["kernel-triton"]
