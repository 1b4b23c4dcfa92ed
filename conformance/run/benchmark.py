"""Benchmarks: the inputs a spec's ``benchmark`` section describes (:mod:`conformance.specs.benchmark`)
and the pytest items that time each backend on them with pytest-benchmark.

Benchmark items exist only with ``--conformance-benchmark``. Each first runs the backend once and
checks its outputs against the NumPy reference (a fast wrong answer is a failure, not a speed-up),
then times ``rounds`` runs; the per-round seconds go into the item's record as ``timing.samples``.
Timings include what the backend does to get its inputs onto the device (NumPy -> torch), as in
the correctness items, and a device sync (CUDA synchronize; XLA through the device's measure).
"""

from __future__ import annotations

import contextlib
from typing import Any, cast

import numpy as np
import pytest
import torch

from conformance.run.items import ConformanceItem, placements
from conformance.core.record import ItemRecord, Timing
from conformance.core.types import RunContext
from conformance.backends.base import Backend
from conformance.core import devices, tolerances
from conformance.core.compare import compare_outputs
from conformance.ops import OPS
from conformance.specs.benchmark import Benchmark
from conformance.core.tensors import CooArray, torch_dtype


# ------------------------------------------------------------------ inputs

def make_inputs(op_name: str, bench: Benchmark, dtype_name: str):
    """The benchmark's inputs for ``op_name`` (the op record's ``benchmark_inputs``, deterministic
    in ``bench.seed``)."""
    if op_name not in OPS:
        raise ValueError(f"unknown op {op_name!r}")
    return OPS[op_name].benchmark_inputs(bench, np.random.default_rng(bench.seed), dtype_name)


def nnz_of(inputs: Any) -> int | None:
    if isinstance(inputs, CooArray):
        return int(inputs.indices.shape[1])
    grads = getattr(inputs, "grads", None)
    if grads:
        return int(sum(g.indices.shape[1] for g in grads if isinstance(g, CooArray)))
    mask = getattr(inputs, "mask", None)
    return int(mask.sum()) if mask is not None else None


# ------------------------------------------------------------------ running

def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _measure(device: str, record: dict):
    measure = getattr(devices, "measure", None)  # XLA: sync and compile counts, when available
    return measure(device, record) if measure is not None else contextlib.nullcontext()


def run_once(op_name: str, backend: Backend, inputs: Any, device: str, dtype_name: str):
    ctx = RunContext(device, torch_dtype(dtype_name))
    with _measure(device, ctx.record):
        outputs = backend.run(op_name, inputs, ctx)
    _sync(device)
    return outputs, ctx


def check_against_reference(op, outputs: dict, inputs: Any, dtype_name: str) -> None:
    """Invariants and the NumPy reference (raises Mismatch)."""
    op.check_invariants(outputs, inputs)
    tols = tolerances.benchmark(op, inputs, torch_dtype(dtype_name))
    reference = op.reference(inputs)
    compare_outputs(outputs, reference, tols, against="the NumPy reference")


def timing_summary(samples: list[float], rounds: int, warmup: int) -> Timing:
    data = sorted(samples)
    mean = sum(data) / len(data)
    return {
        "samples": list(samples), "unit": "s", "rounds": rounds, "warmup_rounds": warmup,
        "median": float(np.median(data)), "min": data[0], "mean": mean,
        "stddev": float(np.std(data, ddof=1)) if len(data) > 1 else 0.0,
        "source": "pytest-benchmark",
    }


def _benchmark_fixture(item: BenchmarkItem):
    """A pytest-benchmark fixture for a non-function item, or (None, why not)."""
    config = item.config
    session = getattr(config, "_benchmarksession", None)
    if session is None:
        return None, "pytest-benchmark is not installed (or was disabled with -p no:benchmark)"
    if session.skip:
        return None, "benchmarks are skipped (--benchmark-skip)"
    if config.getoption("benchmark_disable") and not config.getoption("benchmark_enable"):
        return None, "benchmarks are disabled (--benchmark-disable)"
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and int(workerinput.get("workercount", 1)) > 1:
        return None, "timings need a single process: run benchmarks with -n 0 or -n 1"
    from pytest_benchmark.fixture import BenchmarkFixture  # optional dependency (pytest-benchmark, the report extra)

    # pytest-benchmark turns itself off under xdist; with one worker, timings are as good as without
    add_stats = session.benchmarks.append if workerinput is None else (lambda stats: None)
    fixture = BenchmarkFixture(item, add_stats=add_stats, logger=session.logger, warner=item.warn,
                               disabled=False, **dict(session.options, group=item.record["spec"]))
    return fixture, None


class BenchmarkItem(ConformanceItem):
    """One benchmark instance timed on one backend, device and dtype."""

    kind = "benchmark"

    def __init__(self, *, spec_path, op, bench: Benchmark, **kwargs):
        super().__init__(identity={"spec": str(spec_path), "case": bench.id, "op": op.name,
                                   "benchmark": bench.describe()}, **kwargs)
        self.op = op
        self.bench = bench
        self.spec_path = spec_path
        self.add_marker(pytest.mark.conformance_benchmark)

    def run(self) -> None:
        fixture, why_not = _benchmark_fixture(self)
        if fixture is None:
            pytest.skip(why_not)
        inputs = make_inputs(self.op.name, self.bench, self.dtype)
        nnz = nnz_of(inputs)
        if nnz is not None:  # (the schema's nnz is a count: none where the inputs have no entries to count)
            self.record["benchmark"]["nnz"] = nnz
        outputs, _ = run_once(self.op.name, self.backend, inputs, self.device, self.dtype)
        if not self.backend.is_oracle:
            check_against_reference(self.op, outputs, inputs, self.dtype)
        last: dict[str, Any] = {}

        def timed():
            _, ctx = run_once(self.op.name, self.backend, inputs, self.device, self.dtype)
            last.update(ctx.record)

        try:
            fixture.pedantic(timed, rounds=self.bench.rounds, warmup_rounds=self.bench.warmup, iterations=1)
        finally:
            fixture._cleanup()
        samples = [float(s) for s in fixture.stats.stats.data]
        self.record["timing"] = timing_summary(samples, self.bench.rounds, self.bench.warmup)
        self.record.update(cast(ItemRecord, {k: v for k, v in last.items() if k != "seconds"}))

    def repr_failure(self, excinfo, style=None):
        where = f"{self.spec_path}:{self.bench.line}: {self.name}"
        return f"{where}\n{super().repr_failure(excinfo, style='short')}"

    def reportinfo(self):
        return self.path, self.bench.line - 1 if self.bench.line is not None else None, self.name


def benchmark_items(parent: pytest.File, spec, selection) -> list[pytest.Item]:
    """The benchmark items of a spec for the selected backends, devices and dtypes."""
    return [BenchmarkItem.placed(parent, bench.id, placement, spec_path=spec.path, op=spec.op, bench=bench)
            for bench in getattr(spec, "benchmarks", ())
            for placement in placements(selection, spec.op.name, bench.dtypes, backends=bench.backends,
                                        devices=bench.devices)]
