"""The typed record (conformance.core.record) and the results schema say the same: they cannot drift."""

from __future__ import annotations

from typing import get_type_hints

from conformance.core.record import REQUIRED, BenchmarkInstance, ItemRecord, LooksLike, Record, Timing
from conformance.results.store import results_schema

SCHEMA = results_schema()["$defs"]["record"]


def test_the_record_has_the_schema_record_properties_in_its_order():
    assert list(get_type_hints(Record)) == list(SCHEMA["properties"])


def test_the_required_fields_are_the_schema_required_ones():
    assert list(REQUIRED) == SCHEMA["required"]


def test_the_nested_records_have_the_schema_properties():
    for typed, name in ((LooksLike, "looks_like"), (BenchmarkInstance, "benchmark"), (Timing, "timing")):
        assert list(get_type_hints(typed)) == list(SCHEMA["properties"][name]["properties"]), name


def test_the_plugins_record_is_the_schemas():
    assert ItemRecord is Record


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
