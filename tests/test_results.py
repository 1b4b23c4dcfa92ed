"""Results files: what a real run writes, atomically, and what survives interruptions, hangs and crashes."""

from __future__ import annotations

import json
import os
import signal
import xml.etree.ElementTree as ET

import pytest
import torch

from conformance.results.store import (FORMAT, SCHEMA_VERSION, ResultsError, ResultsWriter, load_results, previous_path,
                                 run_metadata)
from conformance.specs.load import SpecError, load_spec
from conformance_runs import REPO, ROBUST, SMALL_SPEC, adagrad_run, benchmark_run, builtin_run, by_case, load, \
    run_inprocess


def test_a_run_writes_a_valid_results_file_and_junit_xml():
    path = builtin_run()
    results = load_results(path)  # validates against conformance/results/schema/results.schema.json
    run = results.run
    assert run["status"] == "complete" and run["exit_status"] == 0
    assert run["torch"] == torch.__version__
    assert run["python"] and run["numpy"] and run["cpu_model"] and run["started"] <= run["finished"]
    assert run["devices"]["cpu"]["name"]
    assert run["machine"]["fingerprint"]
    assert run["options"]["conformance_backend"] == ["reference,dense,coo"]
    assert run["records_expected"] == len(results.records) and run["not_run"] == []
    specs = {r["spec"] for r in results.records}
    assert specs == {"specs/coalesce.yaml"}  # relative: runs from other checkouts match
    assert {r["backend"] for r in results.records} == {"reference", "dense", "coo"}
    assert {r["outcome"] for r in results.records} <= {"passed", "xfail", "unsupported"}
    passed = [r for r in results.records if r["outcome"] == "passed"]
    assert passed and all(r["seconds"] > 0 for r in passed if "seconds" in r)
    assert sum("seconds" in r for r in passed) > len(passed) // 2  # all but expected-error cases
    assert all(r["nodeid"].startswith(r["spec"] + "::") for r in results.records)

    junit = path.with_name("results.junit.xml")
    cases = ET.parse(junit).getroot().iter("testcase")
    assert len(list(cases)) == len(results.records)


def test_failed_items_carry_the_message_and_errors():
    document = load(adagrad_run("SquareBeforeSumAdagrad"))
    record = by_case(document)["duplicates-summed-before-squaring[candidate-cpu-float32]"]
    assert record["outcome"] == "failed"
    assert "state_sum" in record["message"]
    assert record["max_abs_error"] == pytest.approx(4.0)  # 5 (squares summed) instead of 9
    assert by_case(document)["tutorial-step-1[candidate-cpu-float32]"]["outcome"] == "passed"


def test_benchmark_records_carry_timing_samples():
    document = load(benchmark_run("TorchAdagrad"))
    (record,) = document["records"]
    assert record["kind"] == "benchmark" and record["outcome"] == "passed"
    assert record["case"] == "benchmark-tiny-step-400x8-d0.05"
    assert record["benchmark"] == {"id": "tiny-step", "size": [400, 8], "density": 0.05, "steps": 2, "nnz": 40}
    timing = record["timing"]
    assert len(timing["samples"]) == timing["rounds"] == 7 and timing["warmup_rounds"] == 1
    assert all(s > 0 for s in timing["samples"])
    assert min(timing["samples"]) <= timing["median"] <= max(timing["samples"])


def test_benchmarks_stay_out_of_the_default_run():
    spec = load_spec(SMALL_SPEC)
    assert [b.id for b in spec.benchmarks] == ["benchmark-tiny-step-400x8-d0.05"]
    document = load(adagrad_run("TorchAdagrad"))
    assert not [r for r in document["records"] if r["kind"] == "benchmark"]


def test_a_bad_benchmark_section_names_file_and_line(tmp_path):
    spec = tmp_path / "bad.yaml"
    text = SMALL_SPEC.read_text().replace("densities: [0.05]", "densities: [5]")
    spec.write_text(text)
    with pytest.raises(SpecError) as error:
        load_spec(spec)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "densities: [5]" in l)
    assert f"bad.yaml:{line}:" in str(error.value) and "benchmark[0].densities[0]" in str(error.value)


def test_the_write_is_atomic_and_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    old = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "run": {"id": "older-run", "status": "complete"},
           "records": []}
    path.write_text(json.dumps(old))
    writer = ResultsWriter(path, run_metadata())
    writer.add("specs/x.yaml::c[coo-cpu-float32]", {"spec": "specs/x.yaml", "case": "c", "op": "coalesce",
                                                   "backend": "coo", "device": "cpu", "dtype": "float32",
                                                   "outcome": "failed", "message": "m",
                                                   "max_abs_error": float("nan"), "max_rel_error": float("inf")})
    writer.write()
    assert json.loads(previous_path(path).read_text())["run"]["id"] == "older-run"
    assert load_results(path).records[0]["max_abs_error"] == "NaN"  # strict JSON, still a valid file
    written = path.read_text()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    writer.add("specs/x.yaml::d[coo-cpu-float32]", {"spec": "specs/x.yaml", "case": "d", "op": "coalesce",
                                                   "backend": "coo", "device": "cpu", "dtype": "float32",
                                                   "outcome": "passed", "message": None})
    with pytest.raises(OSError):
        writer.write()
    assert path.read_text() == written  # the last complete file is still there
    assert sorted(p.name for p in tmp_path.iterdir()) == [".previous", "results.json"]  # kept out of *.json globs
    assert [p.name for p in previous_path(path).parent.iterdir()] == ["results.json"]


@pytest.mark.parametrize("content, phrase", [
    ('{"format": "torch-sparse-conformance-results", "schema_v', "not valid JSON (corrupt or truncated file)"),
    ('{"hello": 1}', "not a conformance results file"),
    ('{"format": "torch-sparse-conformance-results", "schema_version": 99, "run": {}, "records": []}',
     "unknown results schema version 99"),
])
def test_unusable_files_are_named_in_a_clear_error(tmp_path, content, phrase):
    path = tmp_path / "broken.json"
    path.write_text(content)
    with pytest.raises(ResultsError) as error:
        load_results(path)
    assert str(path) in str(error.value) and phrase in str(error.value)


def test_a_record_outside_the_schema_is_named(tmp_path):
    document = load(adagrad_run("TorchAdagrad"))
    document["records"][3]["outcome"] = "sort-of"
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ResultsError, match=r"odd.json: does not match the results schema at records/3/outcome"):
        load_results(path)


@pytest.mark.slow
def test_a_hanging_candidate_is_stopped_by_the_per_item_timeout():
    code, path = run_inprocess("hang", str(SMALL_SPEC), "--conformance-impl", f"adagrad={ROBUST}:HangingAdagrad",
                               timeout=1)
    assert code == 1
    records = by_case(load(path))
    hung = records["misbehave-here[candidate-cpu-float64]"]
    assert hung["outcome"] == "error" and "Timeout" in hung["message"]
    assert records["after[candidate-cpu-float64]"]["outcome"] == "passed"  # the run went on


@pytest.mark.parametrize("sigint_handler", [signal.default_int_handler], indirect=True, ids=["terminal"])
def test_an_interrupted_run_still_writes_what_it_learned(sigint_handler):
    code, path = run_inprocess("interrupt", str(SMALL_SPEC), "--conformance-impl",
                               f"adagrad={ROBUST}:InterruptedAdagrad")
    assert code == int(pytest.ExitCode.INTERRUPTED)
    results = load_results(path)
    assert results.run["status"] == "interrupted" and results.run["interrupted_by"] == "SIGINT"
    assert [r["case"] for r in results.records] == ["before"]
    assert [n.split("::")[1] for n in results.run["not_run"]] == [
        "after[candidate-cpu-float64]", "misbehave-here[candidate-cpu-float64]"]


def test_results_are_written_while_the_run_goes_on(monkeypatch, tmp_path):
    """With --conformance-results-every 0.001 the file is rewritten after each item: a run killed at any
    point (SIGKILL, OOM killer, CI hard timeout) leaves what it learned up to there."""
    peek = tmp_path / "peek.json"
    monkeypatch.setenv("CONFORMANCE_TEST_PEEK", str(peek))
    code, path = run_inprocess("peek", str(SMALL_SPEC), "--conformance-impl", f"adagrad={ROBUST}:PeekingAdagrad",
                               "--conformance-results-every", "0.001")
    assert code == 0
    seen = json.loads(peek.read_text())  # the file as it was on disk while misbehave-here ran
    assert seen["run"]["status"] == "running"
    assert [r["case"] for r in seen["records"]] == ["before"]
    assert load_results(path).run["status"] == "complete"


@pytest.mark.slow
def test_a_crashing_candidate_does_not_stop_the_run():
    # the controller is this process; the worker that segfaults and its replacement are fresh ones
    code, path = run_inprocess("segfault", str(SMALL_SPEC), "-n", "1", "-p", "no:benchmark", "--conformance-impl",
                               f"adagrad={ROBUST}:SegfaultingAdagrad")
    assert code == 1
    results = load_results(path)
    assert results.run["status"] == "complete" and results.run["not_run"] == []
    assert results.run["records_expected"] == 3  # known from the workers' collection
    records = by_case({"records": results.records})
    crashed = records["misbehave-here[candidate-cpu-float64]"]
    assert crashed["outcome"] == "error" and crashed["crashed"] is True and crashed["op"] == "adagrad"
    assert "worker process died" in crashed["message"]
    assert records["before[candidate-cpu-float64]"]["outcome"] == "passed"
    assert records["after[candidate-cpu-float64]"]["outcome"] == "passed"  # on the replacement worker
    junit = ET.parse(path.with_name("results.junit.xml")).getroot()
    assert len(list(junit.iter("testcase"))) == 3


@pytest.mark.slow
def test_under_xdist_generated_items_count_as_expected_records():
    code, path = run_inprocess("xdist-generated", "specs", "--conformance-op", "coalesce", "-n", "2", "-p", "no:benchmark",
                               "--conformance-backend", "reference", "--conformance-examples", "2")
    results = load_results(path)
    generated = [r for r in results.records if r.get("generated")]
    assert code == 0 and generated
    assert results.run["records_expected"] == len(results.records) and results.run["not_run"] == []
