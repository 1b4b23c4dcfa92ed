"""``masked_mean_compiles``: one masked-mean idiom run over a series of masks of one shape on the
XLA device, counting the graph compilations of each run (seed document 004's advice: keep shapes
static, watch XLA's compile counts).

Inputs: ``shape``, ``counts`` (the number of valid entries of each mask) and ``seed``; masks and
values are drawn from ``numpy.random.default_rng(seed)``, fresh values per run.
Outputs: ``value`` and ``grad`` of every run (cross-checked with the NumPy reference like
``masked_mean``), ``compiles`` (the ``UncachedCompile`` increase of every run), ``recompiles``
(those of the runs after the first, warm-up one) and ``total_recompiles`` (their sum).
A static-shape idiom compiles in its warm-up run only; a dynamic-shape one (``masked_select``)
compiles again for every number of valid entries it has not seen.
Candidate: like ``masked_mean``, a callable ``(values, bool_mask) -> 0-d tensor``.
"""

from __future__ import annotations

from types import MappingProxyType

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from conformance.core import xla_support
from conformance.core.tolerances import ErrorBound
from conformance.core.types import RunContext, Unsupported
from conformance.ops.base import DIMENSIONS, Op
from conformance.ops.masked_mean import MaskedMeanInputs, differentiate, masked_mean_reference, watch_masked_mean
from conformance.core.tensors import quantize, TENSOR

COMPILES_RECORD_KEY = "compiles_per_mask"


@dataclass
class MaskSeriesInputs:
    shape: tuple[int, ...]
    values: list[np.ndarray]
    masks: list[np.ndarray]

    def runs(self) -> list[MaskedMeanInputs]:
        return [MaskedMeanInputs(v, m) for v, m in zip(self.values, self.masks)]


def run_series(idiom: Callable[[MaskedMeanInputs, RunContext], dict[str, Any]],
               inputs: MaskSeriesInputs, ctx: RunContext) -> dict[str, Any]:
    """Run ``idiom`` (a masked_mean runner) once per mask on XLA, counting each run's compiles."""
    if not xla_support.is_xla(ctx.torch_device):
        raise Unsupported(f"compile counts exist on the xla device only, not on {ctx.device}")
    values, grads, compiles = [], [], []
    for run in inputs.runs():
        with xla_support.count_compiles() as count:  # syncs: the run's graph executes inside
            out = idiom(run, ctx)
        compiles.append(count.uncached_compile)
        values.append(out["value"].detach().cpu().reshape(()))
        grads.append(out["grad"].detach().cpu())
    ctx.record[COMPILES_RECORD_KEY] = compiles
    return {"value": torch.stack(values), "grad": torch.stack(grads), "compiles": compiles,
            "recompiles": compiles[1:], "total_recompiles": sum(compiles[1:])}


def masked_mean_compiles_decode_inputs(raw: dict, dtype: str) -> MaskSeriesInputs:
    shape = tuple(int(s) for s in raw["shape"])
    numel = math.prod(shape)
    rng = np.random.default_rng(int(raw.get("seed", 0)))
    values, masks = [], []
    for index, count in enumerate(raw["counts"]):
        if count > numel:
            raise ValueError(f"counts[{index}] = {count} exceeds the {numel} entries of shape {list(shape)}")
        mask = np.zeros(numel, dtype=bool)
        mask[rng.permutation(numel)[:count]] = True
        masks.append(mask.reshape(shape))
        values.append(quantize(rng.standard_normal(shape), dtype))
    return MaskSeriesInputs(shape, values, masks)


def masked_mean_compiles_reference(inputs: MaskSeriesInputs) -> dict[str, np.ndarray]:
    runs = [masked_mean_reference(run) for run in inputs.runs()]
    return {"value": np.array([r["value"] for r in runs]), "grad": np.stack([r["grad"] for r in runs])}


def masked_mean_compiles_run_candidate(candidate, inputs: MaskSeriesInputs, ctx: RunContext) -> dict[str, Any]:
    return run_series(lambda run, c: differentiate(candidate, run, c), inputs, ctx)


def masked_mean_compiles_watch_candidate(op: "Op", candidate: Any) -> Any:
    """The masked mean's contract, at every call of the series."""
    return watch_masked_mean(op.name, candidate)


def masked_mean_compiles_reference_error_bound(inputs: MaskSeriesInputs) -> ErrorBound:
    return ErrorBound.times_default(1.0 + math.sqrt(max([1] + [int(m.sum()) for m in inputs.masks])))


OP = Op(
    name="masked_mean_compiles",
    stock_backend="dense",
    summary="graph compilations of a masked mean over masks of one shape (XLA)",
    # spec cases only: what it counts (compilations per mask) is judged in its specs, not drawn
    dimensions_left_out=MappingProxyType({
        dimension: "spec cases only: it counts a masked mean's graph compilations on XLA over masks of one shape "
                   "(specs/masked_mean_compiles.yaml); the masked mean's own dimensions are masked_mean's"
        for dimension in DIMENSIONS}),
    candidate_contract="a callable (values, bool_mask) -> 0-d tensor that autograd can differentiate",
    inputs_schema={
        "type": "object", "required": ["shape", "counts"], "additionalProperties": False,
        "properties": {
            "shape": {"$ref": "#/$defs/shape", "minItems": 1},
            "counts": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0},
                       "description": "number of valid (True) entries of each mask, one run per mask"},
            "seed": {"type": "integer", "minimum": 0},
        },
    },
    expected_schema={
        "type": "object", "additionalProperties": False, "minProperties": 1,
        "properties": {
            "value": {"type": "array", "items": {"type": "number"}},
            "grad": TENSOR,
            "compiles": {"type": "array", "items": {"type": "integer", "minimum": 0}},
            "recompiles": {"type": "array", "items": {"type": "integer", "minimum": 0}},
            "total_recompiles": {"type": "integer", "minimum": 0},
        },
    },
    exact_outputs=frozenset({"compiles", "recompiles", "total_recompiles"}),
    decode_inputs=masked_mean_compiles_decode_inputs,
    reference=masked_mean_compiles_reference,
    run_candidate=masked_mean_compiles_run_candidate,
    watch_candidate=masked_mean_compiles_watch_candidate,
    reference_error_bound=masked_mean_compiles_reference_error_bound,
)

