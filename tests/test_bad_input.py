"""The bad-input corpus (issue 13, docs/robustness.md): each bad input or fault once turned into a
crash, a lost file or a silent pass; each test here reproduces one and checks what happens now.
Kept cheap: one-file loads in this process, in-process runs of tiny specs, and two subprocess runs
(started together) where a regression would cost the interpreter (memory) or the signal handling of
this test session.
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
import types
from pathlib import Path

import pytest

from conformance.entry_points import cli
from conformance.results.store import (FORMAT, SCHEMA_VERSION, ResultsError, ResultsWriter, load_results,
                                       lock_path, previous_path, results_lock, run_metadata)
from conformance.run import crashes, outcomes, plugin, transfer
from conformance.specs.load import ELEMENT_BUDGET, MAX_YAML_NODES, SpecError, load_spec
from conformance_runs import MINIMAL_COALESCE_SPEC, NO_GC_AT_EXIT, REPO, SMALL_SPEC, base_args, by_case, load, run_inprocess

BREAKERS = "tests/candidates/contract_breakers.py"

GOOD = MINIMAL_COALESCE_SPEC


def spec_file(directory: Path, name: str, text: str | bytes) -> Path:
    path = directory / f"{name}.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def line_of(text: str, needle: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), 1) if needle in line)


def alias_bomb(levels: int = 9) -> str:
    """A billion-laughs document: 10**levels scalars once its aliases are expanded."""
    rows = ["    l0: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    rows += [f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return GOOD.replace("    derivation:", "\n".join(rows) + "\n    derivation:", 1)


# the pathological spec files of problem 1 (and 4, 6): name -> (text, field the error names, what it says)
PATHOLOGICAL = {
    "fill-bomb": (GOOD.replace("values: [3.0]", "values: {fill: 1.0, shape: [1000000, 1000000]}"),
                  "cases[0].expected.values", "1,000,000,000,000 elements"),
    "arange-bomb": (GOOD.replace("values: [3.0]", "values: {arange: 1000000000000}"),
                    "cases[0].expected.values", "1,000,000,000,000 elements"),
    "sparse-size-bomb": (GOOD.replace("size: [2]", "size: [100000, 100000, 100000]"),
                         "cases[0].inputs.tensor", "1,000,000,000,000,000 elements"),
    "alias-bomb": (alias_bomb(), "cases[0].l5", "with its aliases expanded"),
    "typo-device": (GOOD + "    devices: [cpu0]\n", "cases[0].devices[0]", "unknown device 'cpu0'"),
    "typo-backend": (GOOD + "    known_divergences:\n      - {backends: [cooo], reason: r}\n",
                     "cases[0].known_divergences[0].backends[0]", "unknown backend 'cooo'"),
    "nan-golden": (GOOD.replace("values: [3.0]", "values: [.nan]"), "cases[0].expected.values[0]",
                   "nonfinite: true"),
    # parsed, then failed when matched: a collection error that ran no item of any spec (issue 52, F3)
    "huge-version": (GOOD + '    known_divergences:\n      - {backends: [coo], torch: "<' + "9" * 5000 + '", reason: r}\n',
                     "cases[0].known_divergences[0].torch", "Exceeds the limit (4300 digits)"),
}


# ------------------------------------------------------------------ the subprocess runs, started together

def _limit_memory():  # a regression fails with MemoryError instead of taking the machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (12 * 2**30, 12 * 2**30))


def _start(directory: Path, *args: str, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    results = directory / "results.json"
    directory.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *base_args(results), "-p", "no:randomly",
                             "--conformance-examples", "0", *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=_limit_memory)
    return proc, results


@pytest.fixture(scope="module")
def subprocess_runs(tmp_path_factory):
    """(1) every pathological spec among the real coalesce spec; (2) a run that holds its results
    file while the test tries a second run on it, then has its SIGTERM swallowed in a gc callback."""
    root = tmp_path_factory.mktemp("bad-input-runs")
    bad = root / "bad-specs"
    bad.mkdir()
    paths = [spec_file(bad, name, text) for name, (text, _, _) in PATHOLOGICAL.items()]
    paths.append(spec_file(bad, "latin-1", "op: coalesce\n# caf\xe9\n".encode("latin-1")))
    pathological = _start(root / "pathological", str(REPO / "specs" / "coalesce.yaml"), *map(str, paths),
                          "--conformance-backend", "reference,coo", "--conformance-dtype", "float32")
    gate = root / "gate"
    holder = _start(root / "holder", str(SMALL_SPEC), "--conformance-results-every", "0.001",
                    "--conformance-impl", "adagrad=tests/candidates/faults.py:SwallowedSigtermAdagrad",
                    env={"CONFORMANCE_TEST_GATE": str(gate)})
    yield {"pathological": pathological, "holder": holder, "gate": gate}
    for proc, _ in (pathological, holder):
        if proc.poll() is None:
            proc.kill()


def _finish(run, timeout: float = 240) -> tuple[int, str, dict]:
    proc, results = run
    output, _ = proc.communicate(timeout=timeout)
    return proc.returncode, output, load(results)


# ------------------------------------------------------------------ 1. spec loading cannot take the session down

@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_a_pathological_spec_is_an_error_naming_file_line_and_field(tmp_path, name):
    text, field, phrase = PATHOLOGICAL[name]
    path = spec_file(tmp_path, name, text)
    from conformance.backends import builtin_backends

    builtin_backends()  # the registry's imports (traced on first use) are not the spec's size
    tracemalloc.start()
    try:
        with pytest.raises(SpecError) as info:
            load_spec(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, peak  # sized from the numbers, not by building the thing (no clock: load-proof)
    message = str(info.value)
    assert message.startswith(f"{path}:{info.value.line}: {field}: "), message
    assert phrase in message
    key = field.split(".")[-1].split("[")[0]
    assert info.value.line >= line_of(text, key if key != "l5" else "l5:")


def test_a_spec_that_is_not_utf8_names_the_line_of_the_bad_byte(tmp_path):
    path = spec_file(tmp_path, "latin", "op: coalesce\n# caf\xe9\ncases: []\n".encode("latin-1"))
    with pytest.raises(SpecError, match=r"latin.yaml:2: not UTF-8 text: byte 0xe9"):
        load_spec(path)


def test_a_recursive_alias_is_an_error(tmp_path):
    with pytest.raises(SpecError, match=r"rec.yaml:2: cases\[0\]: an alias refers to a node that contains it"):
        load_spec(spec_file(tmp_path, "rec", "op: coalesce\ncases: &c [*c]\n"))


def test_the_budgets_are_the_documented_ones():
    docs = (REPO / "docs" / "robustness.md").read_text()
    assert f"{ELEMENT_BUDGET:,}" in docs and f"{MAX_YAML_NODES:,}" in docs


def test_a_case_within_the_budget_still_loads(tmp_path):
    big = GOOD.replace("values: [1.0, 2.0], size: [2]", "values: [1.0, 2.0], size: [9000000]")
    assert load_spec(spec_file(tmp_path, "big", big)).cases  # 9e6 elements: inside the budget
    over = GOOD.replace("values: [3.0]", "values: {fill: 0.0, shape: [16000000]}")
    with pytest.raises(SpecError, match="16,000,000 elements"):
        load_spec(spec_file(tmp_path, "over", over))
    # a sparse tensor stores its entries only: an index space beyond 32 bits is a legitimate case
    wide = GOOD.replace("values: [1.0, 2.0], size: [2]", "values: [1.0, 2.0], size: [100000, 100000]") \
        .replace("indices: [[1, 1]]", "indices: [[1, 1], [7, 7]]")
    assert load_spec(spec_file(tmp_path, "wide", wide)).cases


@pytest.mark.slow
def test_a_session_with_pathological_specs_records_every_real_item(subprocess_runs):
    code, output, document = _finish(subprocess_runs["pathological"])
    run, records = document["run"], document["records"]
    assert run["status"] == "complete" and run["not_run"] == [], output[-3000:]
    assert code == 1  # the invalid specs are errors
    invalid = [r for r in records if r["kind"] == "invalid-spec"]
    assert sorted(Path(r["spec"]).stem for r in invalid) == sorted([*PATHOLOGICAL, "latin-1"])
    for record in invalid:
        assert record["outcome"] == "error"
        name = Path(record["spec"]).stem
        if name in PATHOLOGICAL:
            assert f"{name}.yaml:" in record["message"] and PATHOLOGICAL[name][1] in record["message"]
    real = [r for r in records if r["spec"] == "specs/coalesce.yaml"]
    assert run["records_expected"] == len(records) and len(real) == len(records) - len(invalid)
    assert {r["backend"] for r in real} == {"reference", "coo"} and len(real) > 10
    assert {r["outcome"] for r in real} <= {"passed", "xfail"}


# ------------------------------------------------------------------ 2. results files under concurrency

@pytest.mark.slow
def test_a_second_run_on_a_held_results_path_is_told_why_and_changes_nothing(subprocess_runs, capsys):
    proc, results = subprocess_runs["holder"]
    gate = subprocess_runs["gate"]
    deadline = time.monotonic() + 180
    while not gate.with_suffix(".waiting").exists():  # the holder is inside its misbehave-here item
        assert proc.poll() is None and time.monotonic() < deadline, "the holding run never got going"
        time.sleep(0.2)
    before = results.read_bytes()
    code = plugin_main(str(SMALL_SPEC), "--conformance-results", str(results))
    err = capsys.readouterr()
    assert code == int(pytest.ExitCode.USAGE_ERROR)
    assert f"--conformance-results {results}: another run is writing this results file" in err.err + err.out
    assert results.read_bytes() == before  # the holder's file untouched
    gate.write_text("go")
    code, output, document = _finish(subprocess_runs["holder"])
    # 5. the SIGTERM raised inside a gc callback was swallowed ("Exception ignored"), the run still stops
    assert code == int(pytest.ExitCode.INTERRUPTED), output[-3000:]
    assert document["run"]["status"] == "interrupted" and document["run"]["interrupted_by"] == "SIGTERM"
    outcomes = {r["case"]: r["outcome"] for r in document["records"]}
    assert outcomes == {"before": "passed", "misbehave-here": "passed"}  # the KeyboardInterrupt was swallowed
    assert [n.split("::")[1] for n in document["run"]["not_run"]] == ["after[candidate-cpu-float64]"]


def plugin_main(*args: str) -> int:
    return int(pytest.main(["-p", "no:cacheprovider", "-q", "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"),
                            "-o", "addopts=", *NO_GC_AT_EXIT, "--conformance-device", "cpu", "--conformance-examples", "0", *args]))


def test_the_lock_is_released_when_the_run_ends(tmp_path):
    code, path = run_inprocess("lock-released", str(SMALL_SPEC), "--conformance-op", "adagrad",
                               "--conformance-backend", "reference")
    assert code == 0
    lock = results_lock(path)
    lock.acquire(timeout=0)  # would raise filelock.Timeout if the run had kept it
    lock.release()
    assert lock_path(path).name.startswith(".") and not lock_path(path).name.endswith(".json")


def _document(status: str, run_id: str) -> dict:
    return {"format": FORMAT, "schema_version": SCHEMA_VERSION, "run": {"id": run_id, "status": status}, "records": []}


def test_only_a_complete_run_is_backed_up_outside_json_globs(tmp_path):
    path = tmp_path / "results.json"
    junit = tmp_path / "results.junit.xml"
    path.write_text(json.dumps(_document("complete", "complete-run")))
    junit.write_text("<testsuites/>")
    ResultsWriter(path, run_metadata(), companions=(junit,)).write()
    assert json.loads(previous_path(path).read_text())["run"]["id"] == "complete-run"
    assert previous_path(junit).read_text() == "<testsuites/>"
    assert not junit.exists()  # never beside a results file it does not belong to
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["results.json"]

    # the run above was killed (status running): the next run must not back it up over the good backup
    junit.write_text("<stale/>")
    ResultsWriter(path, run_metadata(), companions=(junit,)).write()
    assert json.loads(previous_path(path).read_text())["run"]["id"] == "complete-run"
    assert not junit.exists() and previous_path(junit).read_text() == "<testsuites/>"


def test_a_run_writes_its_junit_xml_with_its_results(tmp_path):
    code, path = run_inprocess("junit-together", str(SMALL_SPEC), "--conformance-op", "adagrad",
                               "--conformance-backend", "reference")
    assert code == 0
    junit = path.with_name("results.junit.xml")
    assert load(path)["run"]["id"] in path.read_text() and junit.exists()
    assert junit.stat().st_mtime >= path.stat().st_mtime - 5


# ------------------------------------------------------------------ 3. contract checks on candidate outputs

@pytest.fixture(scope="module")
def contract_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("contract-specs")
    coalesce_cases = "\n".join(textwrap.dedent(f"""\
          - id: {name}
            derivation: "1 + 2 = 3"
            inputs: {{tensor: {{indices: [[1, 1]], values: [1.0, 2.0], size: [{size}]}}}}
            expected: {{indices: [[1]], values: [3.0]}}""").replace("\n", "\n  ").join(["  ", ""])
                               for name, size in (("wrong-dtype", 2), ("mutates-input", 3), ("system-exit", 4),
                                                  ("correct", 5)))
    spec_file(directory, "coalesce", "op: coalesce\ndefaults: {dtypes: [float32]}\ncases:\n" + coalesce_cases + "\n")
    spec_file(directory, "masked_mean", textwrap.dedent("""\
        op: masked_mean
        cases:
          - id: mean
            dtypes: [float16, bfloat16, float32]
            derivation: "(1 + 3) / 2 = 2"
            inputs: {values: [1.0, 2.0, 3.0], mask: [true, false, true]}
            expected: {value: 2.0, grad: [0.5, 0.0, 0.5]}
    """))
    spec_file(directory, "adagrad", textwrap.dedent("""\
        op: adagrad
        cases:
          - id: step
            dtypes: [float32]
            derivation: "sum = 9; param = 1 - 0.1 * 3 / 3 = 0.9"
            tolerance: {atol: 1.0e-5, rtol: 0}
            inputs:
              param: {fill: 1.0, shape: [2]}
              grads: [{indices: [[0]], values: [3.0], size: [2]}]
              hyperparameters: {lr: 0.1, eps: 0.0}
            expected: {param: [0.9, 1.0], state_sum: [9.0, 0.0]}
    """))
    code, path = run_inprocess("contracts", *sorted(map(str, directory.glob("*.yaml"))), "--conformance-examples", "0",
                               "--conformance-impl", f"coalesce={BREAKERS}:coalesce",
                               "--conformance-impl", f"masked_mean={BREAKERS}:masked_mean_float64",
                               "--conformance-impl", f"adagrad={BREAKERS}:GradRewritingAdagrad")
    return code, by_case(load(path))


def test_a_coalesce_result_of_another_dtype_fails_naming_the_clause(contract_run):
    record = contract_run[1]["wrong-dtype[candidate-cpu-float32]"]
    assert record["outcome"] == "failed"
    assert "contract violated (coalesce: the result has the input's dtype)" in record["message"]
    assert contract_run[1]["correct[candidate-cpu-float32]"]["outcome"] == "passed"


def test_a_masked_mean_in_float64_fails_for_every_other_dtype(contract_run):
    for dtype in ("float16", "bfloat16", "float32"):
        record = contract_run[1][f"mean[candidate-cpu-{dtype}]"]
        assert record["outcome"] == "failed" and "the result has values' dtype" in record["message"], record


def test_a_candidate_that_mutates_its_input_fails(contract_run):
    record = contract_run[1]["mutates-input[candidate-cpu-float32]"]
    assert record["outcome"] == "failed"
    assert "the input tensor is left unchanged): its indices were changed" in record["message"]


def test_an_optimizer_that_rewrites_the_gradient_fails(contract_run):
    record = contract_run[1]["step[candidate-cpu-float32]"]
    assert record["outcome"] == "failed"
    assert "step() leaves param.grad, the gradient the harness set" in record["message"]


# ------------------------------------------------------------------ 5. file and option errors

@pytest.mark.parametrize("args, phrase", [
    (["--conformance-timeout", "-5"], "--conformance-timeout: '-5': must be a finite number of seconds >= 0"),
    (["--conformance-timeout", "nan"], "--conformance-timeout: 'nan'"),
    (["--conformance-results-every", "0"], "--conformance-results-every: '0': must be a finite number of seconds > 0"),
    (["--conformance-results-every", "-1"], "--conformance-results-every: '-1'"),
    (["--conformance-examples", "-1"], "--conformance-examples: expected a whole number >= 0, got '-1'"),
    # an INTERNALERROR before: the generated items' timeout grows with the examples, past any timer
    (["--conformance-examples", "99999999999999999999"],
     "--conformance-examples: expected a whole number <= 1,000,000, got '99999999999999999999'"),
])
def test_numeric_options_out_of_range_are_usage_errors(capsys, args, phrase):
    code = plugin_main(str(SMALL_SPEC), *args)
    output = capsys.readouterr()
    assert code == int(pytest.ExitCode.USAGE_ERROR)
    assert phrase in output.err + output.out


@pytest.mark.parametrize("where", ["directory", "parent-is-a-file", "proc"])
def test_an_unusable_results_path_is_a_usage_error_naming_the_option(tmp_path, capsys, where):
    if where == "directory":
        path = tmp_path
    elif where == "parent-is-a-file":
        (tmp_path / "file").write_text("x")
        path = tmp_path / "file" / "results.json"
    else:
        path = Path("/proc/results.json")
    code = plugin_main(str(SMALL_SPEC), "--conformance-results", str(path))
    output = capsys.readouterr()
    assert code == int(pytest.ExitCode.USAGE_ERROR), output.out[-2000:]
    assert f"--conformance-results {path}:" in output.err + output.out


@pytest.mark.parametrize("where", ["parent-is-a-file", "proc"])
def test_an_unusable_junitxml_path_is_a_usage_error_before_anything_runs(tmp_path, capsys, where):
    """pytest writes ``--junitxml`` at the end: an unwritable one was a traceback there, after every item
    ran, with the results file left ``running`` with 0 records (round five, F9)."""
    if where == "parent-is-a-file":
        (tmp_path / "file").write_text("x")
        junit = tmp_path / "file" / "j.xml"
    else:
        junit = Path("/proc/j.xml")
    results = tmp_path / "r.json"
    code = plugin_main(str(SMALL_SPEC), "--conformance-backend", "reference", "--conformance-results", str(results),
                       "--junitxml", str(junit))
    output = capsys.readouterr()
    assert code == int(pytest.ExitCode.USAGE_ERROR), output.out[-2000:]
    assert f"--junitxml {junit}: " in output.err + output.out
    assert not results.exists()


def test_the_results_are_written_when_another_plugins_sessionfinish_raises(tmp_path):
    class FailsAtTheEnd:  # as pytest's junitxml does on a full disk
        def pytest_sessionfinish(self):
            raise OSError(errno.ENOSPC, "No space left on device")

    results = tmp_path / "r.json"
    with pytest.raises(OSError, match="No space left"):
        pytest.main([*base_args(results), str(SMALL_SPEC), "--conformance-backend", "reference",
                     "--conformance-examples", "0"], plugins=[FailsAtTheEnd()])
    document = load(results)
    assert document["run"]["status"] == "complete" and len(document["records"]) == 3


def test_after_a_full_disk_the_summary_line_says_what_the_file_holds_and_no_junit_says_more(monkeypatch, capsys):
    """The file on disk is the last write that fit; the line named it with the run's counts in memory,
    and the JUnit XML beside it described every item (round five, F11)."""
    from conformance.results import store

    writes = []

    def fills_the_disk(path, document):  # the first two writes fit: the run's start and its first item
        if len(writes) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        writes.append(path)
        write_json(path, document)

    write_json = store.atomic_write_json
    monkeypatch.setattr(store, "atomic_write_json", fills_the_disk)
    code, path = run_inprocess("full-disk", str(SMALL_SPEC), "--conformance-backend", "reference",
                               "--conformance-results-every", "0.001")
    out = capsys.readouterr().out
    assert code == int(pytest.ExitCode.INTERRUPTED), out[-2000:]
    document = load(path)
    assert document["run"]["status"] == "running" and len(document["records"]) == 1
    junit = path.with_name("results.junit.xml")
    assert f"conformance results: {path} (last write that fit: 1 records, status running; the run had 2 records, " \
           f"1 collected items not run; status interrupted; removed the JUnit XML {junit})" in out, out[-2000:]
    assert not junit.exists()


def test_a_results_file_that_is_not_utf8_is_named_by_report_and_gate(tmp_path, capsys):
    good = tmp_path / "good.json"
    code, path = run_inprocess("utf8-good", str(SMALL_SPEC), "--conformance-op", "adagrad",
                               "--conformance-backend", "reference")
    good.write_bytes(path.read_bytes())
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"format": "caf\xe9"}')
    with pytest.raises(ResultsError, match=r"bad.json: not UTF-8 text \(byte 0xe9"):
        load_results(bad)
    capsys.readouterr()
    assert cli.main(["report", str(good), str(bad), "-o", str(tmp_path / "index.html")]) == 0
    err = capsys.readouterr().err
    assert f"left out {bad}: not UTF-8 text" in err
    assert cli.main(["gate", "--baseline", str(good), "--candidate", str(bad), "--skip-timing"]) == 2
    assert f"{bad}: not UTF-8 text" in capsys.readouterr().err


# ------------------------------------------------------------------ 6. consistent records

def test_a_crashed_worker_item_is_an_error_in_the_terminal_as_in_the_json():
    report = pytest.TestReport(nodeid="tests/data/robustness_adagrad.yaml::misbehave-here[candidate-cpu-float64]",
                               location=("x", None, "x"), keywords={}, outcome="failed",
                               longrepr="worker 'gw0' crashed", when="???")
    identity = {"kind": "case", "spec": "tests/data/robustness_adagrad.yaml", "case": "misbehave-here",
                "op": "adagrad", "backend": "candidate", "device": "cpu", "dtype": "float64"}
    config = types.SimpleNamespace(stash=pytest.Stash())
    transfer.collected(config).add([[report.nodeid, identity]])  # as the worker's first report would have brought it
    crashes.pytest_handlecrashitem(report.nodeid, report, sched=types.SimpleNamespace(config=config))
    record = outcomes.record_of(report)
    assert {k: record[k] for k in identity} == identity
    assert record["outcome"] == "error" and record["crashed"] is True
    assert plugin.pytest_report_teststatus(report, config=None) == ("error", "E", ("ERROR", {"red": True}))


def test_a_candidate_system_exit_is_recorded_with_its_type(contract_run):
    record = contract_run[1]["system-exit[candidate-cpu-float32]"]
    assert record["outcome"] == "error" and record["message"] == "SystemExit: 3"


def test_nonfinite_golden_values_load_only_where_the_case_says_so(tmp_path):
    text = GOOD.replace("values: [3.0]", "values: [.inf]")
    with pytest.raises(SpecError, match=r"cases\[0\].expected.values\[0\]: golden value inf is not finite"):
        load_spec(spec_file(tmp_path, "inf", text))
    assert load_spec(spec_file(tmp_path, "marked", text + "    nonfinite: true\n")).cases
    masked_mean = load_spec(REPO / "specs" / "masked_mean.yaml")  # its no-valid-entry case is NaN, marked
    assert "no-valid-entry" in [case.id for case in masked_mean.cases]


# ------------------------------------------------------------------ what already held, kept so

@pytest.mark.parametrize("name, text, pattern", [
    ("syntax", GOOD.replace("size: [2]}", "size: [2]"), r"syntax.yaml:\d+: invalid YAML"),
    # the message names the tab (libyaml's, which parses the files that are valid, leaves it out)
    ("tab", GOOD.replace("\n  - id", "\n\t- id", 1), r"tab.yaml:\d+: invalid YAML: found character '\\t'"),
    ("schema", GOOD.replace("derivation:", "derivaton:"), r"schema.yaml:4: cases\[0\].derivaton: unexpected field"),
    ("unknown-op", GOOD.replace("op: coalesce", "op: coalescе"), r"unknown-op.yaml:1: op: 'coalescе' is not one of"),
    ("unsafe-tag", GOOD.replace("values: [3.0]", "values: !!python/object/apply:os.system [echo hi]"),
     r"unsafe-tag.yaml:\d+: invalid YAML"),
    ("index-out-of-range", GOOD.replace("indices: [[1, 1]]", "indices: [[1, 7]]"),
     r"index-out-of-range.yaml:6: cases\[0\].inputs: indices of dim 0 must lie in \[0, 2\)"),
    ("typo-dtype", GOOD.replace("dtypes: [float32]", "dtypes: [float23]"),
     r"typo-dtype.yaml:5: cases\[0\].dtypes\[0\]: 'float23' is not one of"),
])
def test_bad_specs_that_already_held_name_file_and_line(tmp_path, name, text, pattern):
    with pytest.raises(SpecError) as info:
        load_spec(spec_file(tmp_path, name, text))
    assert re.search(pattern, str(info.value)), str(info.value)


def test_a_candidate_that_cannot_be_imported_is_a_usage_error(capsys):
    code = plugin_main(str(SMALL_SPEC), "--conformance-impl", "adagrad=no_such_module_here:Adagrad")
    assert code == int(pytest.ExitCode.USAGE_ERROR)
    assert "importing no_such_module_here raised ModuleNotFoundError" in capsys.readouterr().err
