"""The typed record (conformance.record) and the results schema say the same: they cannot drift."""

from __future__ import annotations

from typing import get_type_hints

from conformance.record import REQUIRED, BenchmarkInstance, ItemRecord, LooksLike, Record, Timing
from conformance.results.store import results_schema

SCHEMA = results_schema()["$defs"]["record"]


def test_the_record_has_the_schema_record_properties_in_its_order():
    assert list(get_type_hints(Record)) == list(SCHEMA["properties"])


def test_the_required_fields_are_the_schema_required_ones():
    assert list(REQUIRED) == SCHEMA["required"]


def test_the_nested_records_have_the_schema_properties():
    for typed, name in ((LooksLike, "looks_like"), (BenchmarkInstance, "benchmark"), (Timing, "timing")):
        assert list(get_type_hints(typed)) == list(SCHEMA["properties"][name]["properties"]), name


def test_the_item_record_adds_only_what_the_schema_does_not_describe():
    extra = set(get_type_hints(ItemRecord)) - set(get_type_hints(Record))
    assert extra and not extra & set(SCHEMA["properties"])
    assert set(get_type_hints(ItemRecord)) >= set(get_type_hints(Record))


def test_what_a_run_writes_is_declared():
    """Every key of a real run's records (built-in backends, and a candidate: verdicts, values) is a
    field of ItemRecord."""
    import json

    from conformance_runs import adagrad_run, builtin_run

    declared = set(get_type_hints(ItemRecord))
    for path in (builtin_run(), adagrad_run("SquareBeforeSumAdagrad")):
        records = json.loads(path.read_text(encoding="utf-8"))["records"]
        written = {key for record in records for key in record}
        assert written <= declared, sorted(written - declared)
