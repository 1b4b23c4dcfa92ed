"""One item's record in the results file, typed.

:class:`Record` (also named :data:`ItemRecord`, the plugin's name for it) declares every
property the results schema (``conformance/results/schema/results.schema.json``, ``$defs.record``)
gives a record -- the spec and benchmark items' fields, generated items' search, verdicts,
divergences, crashes -- and ``REQUIRED`` the ones it requires; ``tests/test_record.py`` keeps both
equal to the schema and checks that a real run writes nothing else.

A record is a ``TypedDict``: at run time it is the very dict that is written to the JSON and read
back from it, and that travels between pytest-xdist's processes in a report's user properties
(execnet sends only plain builtin types). So there is nothing to convert either way: a record is
its JSON (the writer only turns non-finite floats into strings, ``results.store.to_jsonable``),
and a record read from a file has been checked against the schema by the loader. A key stays
absent until something sets it: most properties are optional.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

Kind = Literal["case", "benchmark", "invalid-spec"]
OutcomeName = Literal["passed", "failed", "error", "unsupported", "xfail", "xpass", "skipped"]
ErrorValue = float | Literal["NaN", "Infinity"] | None  # a max error; non-finite as a string (strict JSON)
Values = Any  # one side of a small output: a list of values, one value, or None (the schema's $defs.values)


class LooksLike(TypedDict):
    """The known mistake a failing item's output matches (:mod:`conformance.core.diagnosis`)."""

    name: str
    explanation: str


class BenchmarkInstance(TypedDict, total=False):
    """A benchmark item's instance (``Benchmark.describe()``; ``nnz`` once its inputs are built)."""

    id: str
    size: list[int]
    density: float
    steps: int
    nnz: int


class Compiles(TypedDict):
    """What a compiler compiled for one item (:data:`COMPILES`): which compiler (:data:`XLA` for torch_xla's
    graph compilations, :data:`INDUCTOR` for torch.compile's TorchDynamo + Inductor) and its counts by name
    (torch_xla: ``uncached_compile``, ``cached_compile``, ``compile_time_samples``; torch.compile:
    ``dynamo_graphs``, ``dynamo_recompiles``, ``dynamo_graph_breaks``, ``dynamo_frames``, and ``steps`` or
    ``calls``)."""

    compiler: str
    counts: dict[str, int]


class Timing(TypedDict, total=False):
    """A benchmark item's timings (``conformance.run.benchmark.timing_summary``)."""

    samples: list[float]
    unit: Literal["s"]
    rounds: int
    warmup_rounds: int
    median: float
    min: float
    mean: float
    stddev: float
    source: str


class Record(TypedDict, total=False):
    """The results schema's record: its properties, in its order."""

    nodeid: str  # pytest node id, relative to the run's rootdir
    rerun: str  # the command that re-runs this one item (python -m conformance replay ...)
    kind: Kind
    spec: str
    case: str | None
    op: str | None
    backend: str | None
    device: str | None
    dtype: str | None
    outcome: OutcomeName
    message: str | None
    max_abs_error: ErrorValue
    max_rel_error: ErrorValue
    torch_max_abs_error: ErrorValue  # a candidate item's: stock torch's on the same inputs
    values: dict[str, dict[str, Values]]  # small outputs: {output: {expected, torch, got}}
    seconds: float | None  # wall time of the backend's one run
    compiles: Compiles  # what a compiler compiled for it (torch_xla, torch.compile)
    crashed: bool  # the worker process died while running this item
    looks_like: LooksLike
    benchmark: BenchmarkInstance
    timing: Timing | None

    # generated items (conformance.run.generated_plugin)
    generated: bool
    examples: int
    unsupported_examples: int
    seed: int | str | None
    profile: str
    hypothesis_database: str | None
    budget_reached: str
    saved_example: str
    examples_capped: str  # fewer drawn examples than the run's count, and why (Backend.emulated_examples)
    narrowed: Any
    improvements: Any
    known_divergences: dict[str, int]  # a divergence's key -> examples that matched its model
    counterexample: str  # the written counterexample spec and script
    counterexample_script: str
    torch_reproducers: list[str]
    # judging (conformance.judging.runner, conformance.judging.verdict)
    verdict: str
    improvement: str
    divergence: dict[str, str | None]  # the recorded known divergence: {reason, link}
    stale_divergence: str
    torch_stand_in: str
    # a crashed worker (conformance.run.crashes.crash_record)
    timed_out: bool
    signal: str


# the schema's required properties: every record the writer keeps has them
REQUIRED = ("nodeid", "kind", "spec", "case", "op", "backend", "device", "dtype", "outcome")

ItemRecord = Record  # what the plugin writes: every key of it is a property of the schema


# ---------------------------------------------------------------- compile counts

CANDIDATE = "candidate"  # the backend of the user's implementation (--conformance-impl): its records' name
COMPILES = "compiles"  # the record's compile counts (:class:`Compiles`)
XLA = "torch_xla"  # Compiles.compiler: torch_xla's graph compilations (conformance.core.xla_support)
INDUCTOR = "torch.compile/inductor"  # Compiles.compiler: TorchDynamo + Inductor (conformance/backends/compiled.py)
# the field's name in results files written before it was ``compiles``: bare counts, torch_xla's or (the
# compiled backend's, keys ``dynamo_*``) torch.compile's; read as ``compiles`` (:func:`upgraded`)
LEGACY_COMPILES = "xla_compiles"


def compiles(compiler: str, counts: dict[str, int]) -> Compiles:
    """The record's :data:`COMPILES` value: ``counts`` (name -> count) of ``compiler``."""
    return {"compiler": compiler, "counts": dict(counts)}


def _legacy_compiles(counts: Any) -> Compiles | None:
    if not isinstance(counts, dict):
        return None
    compiler = INDUCTOR if any(str(name).startswith("dynamo_") for name in counts) else XLA
    return compiles(compiler, counts)


def upgraded(record: dict) -> dict:
    """``record`` as this version of the suite writes it: an older file's :data:`LEGACY_COMPILES` (bare
    counts) becomes :data:`COMPILES`, with the compiler its counts' names say (in place; returned)."""
    if LEGACY_COMPILES in record:
        legacy = record.pop(LEGACY_COMPILES)
        if COMPILES not in record:
            converted = _legacy_compiles(legacy)
            if converted is not None:
                record[COMPILES] = converted
    return record
