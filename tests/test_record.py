"""The typed record (conformance.core.record) and the results schema say the same: they cannot drift."""

from __future__ import annotations

from typing import get_type_hints

import pytest

from conformance.core.record import (INDUCTOR, REQUIRED, XLA, BenchmarkInstance, Compiles, ItemRecord, LooksLike,
                                     Record, Timing, compiles, upgraded)
from conformance.results.store import results_schema

SCHEMA = results_schema()["$defs"]["record"]


def test_the_record_has_the_schema_record_properties_in_its_order():
    assert list(get_type_hints(Record)) == list(SCHEMA["properties"])


def test_the_required_fields_are_the_schema_required_ones():
    assert list(REQUIRED) == SCHEMA["required"]


def test_the_nested_records_have_the_schema_properties():
    for typed, name in ((LooksLike, "looks_like"), (BenchmarkInstance, "benchmark"), (Timing, "timing"),
                        (Compiles, "compiles")):
        assert list(get_type_hints(typed)) == list(SCHEMA["properties"][name]["properties"]), name


def test_the_plugins_record_is_the_schemas():
    assert ItemRecord is Record


@pytest.mark.slow
def test_what_a_run_writes_is_declared_and_valid():
    """Every key of real runs' records (built-in backends; a candidate: verdicts, values; generated
    items: their search and known divergences) is a property of the schema, and every record
    validates against it."""
    import json

    from jsonschema import Draft202012Validator

    from conformance_runs import REPO, adagrad_run, builtin_run, run_inprocess

    _, generated = run_inprocess("record-generated", str(REPO / "specs"), "-k", "generated and adagrad-param-groups",
                                 "--conformance-backend", "coo", "--conformance-dtype", "float16")
    validator = Draft202012Validator(results_schema())
    written = set()
    for path in (builtin_run(), adagrad_run("SquareBeforeSumAdagrad"), generated):
        document = json.loads(path.read_text(encoding="utf-8"))
        written |= {key for record in document["records"] for key in record}
        errors = [f"{path}: {list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(document)]
        assert not errors, errors[:5]
    assert written <= set(get_type_hints(Record)), sorted(written - set(get_type_hints(Record)))
    assert {"verdict", "generated", "examples", "known_divergences"} <= written


def test_compile_counts_are_compiles_with_what_compiled_them():
    """The compile counts' field is named for no one compiler (torch_xla's and torch.compile's counts are
    both kept there) and says which compiler counted: ``{"compiler": ..., "counts": {...}}``."""
    from jsonschema import Draft202012Validator

    assert "compiles" in SCHEMA["properties"] and "xla_compiles" not in SCHEMA["properties"]
    assert SCHEMA["properties"]["compiles"]["required"] == ["compiler", "counts"]
    validator = Draft202012Validator({"$defs": results_schema()["$defs"], "$ref": "#/$defs/record"})
    record = {"nodeid": "x", "kind": "case", "spec": "s", "case": "c", "op": "o", "backend": "compiled", "device": "cpu",
              "dtype": "float32", "outcome": "passed", "compiles": compiles(INDUCTOR, {"dynamo_graphs": 1})}
    assert not list(validator.iter_errors(record))
    assert list(validator.iter_errors({**record, "compiles": {"dynamo_graphs": 1}}))  # bare counts: not this schema


def test_an_older_files_xla_compiles_is_read_as_compiles():
    """Results files written before the rename hold bare counts under xla_compiles: torch_xla's, or (keys
    dynamo_*) the compiled backend's. Read, they are compiles with the compiler their names say."""
    xla_counts = {"compile_time_samples": 2, "uncached_compile": 2, "cached_compile": 0}
    dynamo_counts = {"dynamo_graphs": 1, "dynamo_recompiles": 0, "dynamo_graph_breaks": 1, "dynamo_frames": 2, "steps": 1}
    assert upgraded({"outcome": "passed", "xla_compiles": dict(xla_counts)}) == {
        "outcome": "passed", "compiles": {"compiler": XLA, "counts": xla_counts}}
    assert upgraded({"xla_compiles": dict(dynamo_counts)}) == {"compiles": {"compiler": INDUCTOR, "counts": dynamo_counts}}
    new = {"compiles": compiles(XLA, xla_counts)}
    assert upgraded({**new, "xla_compiles": dynamo_counts}) == new  # the newer field wins
    assert upgraded({"outcome": "passed"}) == {"outcome": "passed"}
