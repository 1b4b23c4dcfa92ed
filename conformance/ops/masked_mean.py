"""``masked_mean``: the mean over the valid entries of a tensor, and its gradient.

Contract: ``value = mean(values[mask])`` and ``grad = d value / d values = mask / mask.sum()``:
zero at every invalid entry; values under the mask (NaN and inf included) affect neither the value
nor the gradient. With no valid entry the value is NaN (undefined) and the gradient all zero.
Candidate: a callable ``(values, bool_mask) -> 0-d tensor`` that autograd can differentiate; the tensor and
the gradient may be MaskedTensors, read at their specified entries (:mod:`conformance.ops.masked_mean_candidate`).
"""

from __future__ import annotations

from types import MappingProxyType

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hypothesis import strategies as st

from conformance.core.types import Mismatch, Mistake
from conformance.core.layouts import LAYOUT_KINDS
from conformance.core.compare import assert_bits_equal, finite_abs_max, first_index
from conformance.core.divergences import STOCK_TORCH, Divergence, register
from conformance.ops import draw as d
from conformance.ops.base import COMPILED, SIZE_BOUNDARIES, GeneratedProperty, Op, Strategies, TorchPath, dtype_only
from conformance.ops.masked_mean_candidate import differentiate, watch_masked_mean  # noqa: F401 - re-exported
from conformance.core.dtypes import DTYPES, OPMATH_ROUNDOFF, is_half
from conformance.core.tolerances import ErrorBound
from conformance.core.rounding import rounded
from conformance.core.tensors import TENSOR, decode_array, encode_array, quantize, rounder, to_numpy


@dataclass
class MaskedMeanInputs:
    values: np.ndarray
    mask: np.ndarray


def masked_mean_reference(inputs: MaskedMeanInputs) -> dict[str, Any]:  # (value: a NumPy scalar)
    count = int(inputs.mask.sum())
    if count == 0:
        return {"value": np.float64("nan"), "grad": np.zeros_like(inputs.values)}
    with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf at valid entries: NaN, the contract's mean
        value = inputs.values[inputs.mask].sum() / count
    grad = np.where(inputs.mask, 1.0 / count, 0.0)
    return {"value": np.float64(value), "grad": grad}


def torch_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Stock torch's masked mean: ``torch.masked.mean`` (the documented masked reduction)."""
    return torch.masked.mean(values, mask=mask)


def where_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The dense masked mean torch users write, and the one the ``compiled`` backend compiles (the
    record's ``torch_paths``): ``where(mask, values, 0).sum() / mask.sum()`` (the dense backend's
    formulation). ``where`` keeps a NaN or inf under the mask out of the value, and its backward
    (``where(mask, grad, 0)``) out of the gradient, also with no valid entry (``1 / 0 = inf`` is
    selected away): value NaN (``0 / 0``), gradient 0, as the contract says."""
    return torch.where(mask, values, torch.zeros((), dtype=values.dtype, device=values.device)).sum() / mask.sum()


# ---------------------------------------------------------------- generated inputs and properties


@st.composite

def drawn_inputs(draw, dtype: str = "float64", *, min_dims: int = 0, max_dims: int = 3,
                 max_side: int = 4) -> MaskedMeanInputs:
    """Values and a mask; NaN/±inf are put under the mask (masked-out) often and at a valid entry
    in about half the draws (NaN beside a finite valid entry), so both "ignored" and "propagated"
    non-finite values occur."""
    d.check_dtype(dtype)
    shape = draw(d.shapes(min_dims, max_dims, 0, max_side))
    mask = draw(d.masks(shape))
    values = d.dense_values(draw, shape, d.representable_floats(dtype))
    flat_values, flat_mask = values.reshape(-1), mask.reshape(-1)
    if flat_values.size:
        valid = [i for i in range(flat_values.size) if flat_mask[i]]
        special = draw(_VALID_SPECIALS) if valid else None  # a NaN or inf the mean must propagate
        if special is not None and math.isnan(special) and len(valid) == 1 and flat_values.size > 1:
            # a finite valid entry beside the NaN, where skipping the NaN changes the mean
            other = draw(st.sampled_from([i for i in range(flat_values.size) if not flat_mask[i]]))
            flat_mask[other] = True
            valid.append(other)
        if special is not None:
            flat_values[draw(st.sampled_from(valid))] = special
        invalid = [i for i in range(flat_values.size) if not flat_mask[i]]
        if invalid and draw(st.booleans()):
            for i in draw(st.lists(st.sampled_from(invalid), min_size=1, max_size=len(invalid), unique=True)):
                flat_values[i] = draw(d.special_values())
    return MaskedMeanInputs(flat_values.reshape(shape), flat_mask.reshape(shape))


# what drawn_inputs puts at one valid entry: nothing (shrinks to it), NaN (a skipna mean -- pandas'
# default -- differs whenever another valid entry is finite) or +-inf. Frequent enough that the ci
# profile's 8 examples per item meet NaN at a valid entry beside a finite one (tests/test_coverage.py)
_VALID_SPECIALS = st.sampled_from([None, None, math.nan, math.nan, math.nan, math.inf, -math.inf])


@st.composite

def rounding_inputs(draw, dtype: str) -> MaskedMeanInputs:
    """Long masked sums (up to 2048 entries): equal values, or values of mixed sign and size,
    drawn from a seeded generator so that long inputs stay cheap to draw."""
    d.check_dtype(dtype)
    length = draw(st.sampled_from([2, 3, 7, 64, 300, 1000, 2048]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        values = np.full(length, draw(d.representable_floats(dtype, d.ROUNDING_VALUES, zero=False)))
    else:
        values = rng.uniform(-8.0, 8.0, length)
    mask = rng.random(length) < draw(st.sampled_from([0.3, 0.9, 1.0]))
    mask[draw(st.integers(0, length - 1))] = True  # at least one valid entry
    return MaskedMeanInputs(quantize(values, dtype), mask)


@st.composite

def masked_pairs(draw, dtype: str):
    inputs = draw(drawn_inputs(dtype))
    fill = draw(st.sampled_from(["zero", "nan", "inf", "-inf", "huge", "other"]))
    values = inputs.values.copy()
    invalid = ~inputs.mask
    big = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
           "float64": 1.7976931348623157e308}[dtype]
    fills = {"zero": 0.0, "nan": math.nan, "inf": math.inf, "-inf": -math.inf, "huge": big}
    if fill == "other":
        count = int(invalid.sum())
        values[invalid] = draw(st.lists(d.representable_floats(dtype), min_size=count, max_size=count))
    else:
        values[invalid] = fills[fill]
    return inputs, MaskedMeanInputs(values, inputs.mask.copy())


def check_ignores_masked_out(trial, pair) -> None:
    first, second = pair
    a, b = trial.run(first), trial.run(second)
    try:
        for name in ("value", "grad"):
            assert_bits_equal(name, b[name], a[name], None,
                              against="the same inputs with other values (NaN/inf included) under the mask")
    except Mismatch as mismatch:
        trial.excuse([(first, a), (second, b)], mismatch)
        raise


def check_grad_zero_outside_mask(trial, inputs: MaskedMeanInputs) -> None:
    outputs = trial.run(inputs)
    grad = to_numpy(outputs["grad"])
    if grad.shape != inputs.mask.shape:
        raise Mismatch(f"grad has shape {list(grad.shape)}, values have shape {list(inputs.mask.shape)}")
    outside = ~inputs.mask & ~(grad == 0)
    if outside.any():
        index = first_index(outside)
        mismatch = Mismatch(f"grad is not zero outside the mask: {int(outside.sum())} entries, first at index "
                            f"{index}: {float(grad[index])!r}")
        trial.excuse([(inputs, outputs)], mismatch)
        raise mismatch


def pair_cases(pair, dtype: str):
    return [("masked-out-a", pair[0]), ("masked-out-b", pair[1])]


# ---------------------------------------------------------------- known mistakes (conformance.core.diagnosis)


def _count_and_grad(inputs: MaskedMeanInputs, count: float | None = None) -> tuple[float, np.ndarray] | None:
    count = float(inputs.mask.sum()) if count is None else count
    if count == 0:
        return None
    return count, np.where(inputs.mask, 1.0 / count, 0.0)


def multiply_by_mask_model(inputs: MaskedMeanInputs):
    counted = _count_and_grad(inputs)
    if counted is None:
        return None
    count, grad = counted
    with np.errstate(invalid="ignore", over="ignore"):
        total = (inputs.values * inputs.mask).sum()
    return {"value": np.float64(total / count), "grad": grad}


def nansum_model(inputs: MaskedMeanInputs):
    counted = _count_and_grad(inputs)
    if counted is None:
        return None
    count, _ = counted
    with np.errstate(invalid="ignore", over="ignore"):
        product = inputs.values * inputs.mask
        total = np.nansum(product)
    # nansum's backward passes no gradient to a NaN it skipped
    return {"value": np.float64(total / count), "grad": np.where(inputs.mask & ~np.isnan(product), 1.0 / count, 0.0)}


def skipna_model(inputs: MaskedMeanInputs):
    """pandas' ``Series.where(mask).mean()``: NaN at a valid entry is skipped, and not counted."""
    kept = inputs.mask & ~np.isnan(inputs.values)
    if not kept.any():
        return {"value": np.float64("nan"), "grad": np.zeros(inputs.values.shape)}
    with np.errstate(invalid="ignore", over="ignore"):
        value = np.float64(inputs.values[kept].sum() / kept.sum())
    return {"value": value, "grad": np.where(kept, 1.0 / kept.sum(), 0.0)}


def zero_count_model(inputs: MaskedMeanInputs):
    if inputs.mask.any():
        return None
    return {"value": np.float64("nan"), "grad": np.full(inputs.values.shape, np.nan)}


def numel_model(inputs: MaskedMeanInputs):
    if inputs.values.size == 0:
        return None
    counted = _count_and_grad(inputs, float(inputs.values.size))
    assert counted is not None  # (a count of values.size, not 0)
    count, grad = counted
    with np.errstate(invalid="ignore", over="ignore"):
        total = np.where(inputs.mask, inputs.values, 0.0).sum()
    return {"value": np.float64(total / count), "grad": grad}


def grad_leak_model(inputs: MaskedMeanInputs):
    count = float(inputs.mask.sum())
    with np.errstate(divide="ignore"):
        grad = np.full(inputs.values.shape, np.float64(1.0) / count)  # 1 / 0 = inf with no valid entry
    return {"value": masked_mean_reference(inputs)["value"], "grad": grad}


def half_sum_model(inputs: MaskedMeanInputs, dtype: str):
    """The valid values summed one after another in ``dtype`` (float16/bfloat16), then divided."""
    counted = _count_and_grad(inputs)
    if counted is None or not is_half(dtype):
        return None
    q = rounder(dtype)
    total = q(0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        for value in inputs.values[inputs.mask].reshape(-1):
            total = q(total + value)
    return {"value": np.float64(q(total / counted[0]))}


MISTAKES = (
    Mistake("multiply-by-mask mean", "sum(values * mask) / count: a NaN or inf under the mask leaks in (NaN * 0 = NaN)",
            multiply_by_mask_model),
    Mistake("NaN dropped from the sum (nansum)", "nansum(values * mask) / count hides a masked-out NaN, and also a "
            "NaN at a valid entry, which must propagate", nansum_model),
    Mistake("skipna mean", "NaN at a valid entry is skipped and not counted (pandas' default skipna=True), where the "
            "mean must be NaN", skipna_model),
    Mistake("NaN gradient with no valid entry", "sum(values * mask) / mask.sum() backpropagates mask * (1 / 0) = "
            "0 * inf = NaN into every entry when no entry is valid; the gradient must be zero there", zero_count_model),
    Mistake("numel instead of count", "divides by the number of entries, not the number of valid ones", numel_model),
    Mistake("gradient leaking outside the mask", "the gradient is 1/count at every entry: the backward forgets to "
            "multiply by the mask", grad_leak_model),
    Mistake("half-precision accumulation", "the valid values are summed in float16/bfloat16, one rounding per "
            "addition, where torch accumulates in float32", half_sum_model, tight=True),
)


# the last step of the idioms' sum() / mask.sum() on a device that is not the CPU; what it does to a long
# bfloat16 mean was measured on an NVIDIA H200 (torch 2.11.0+cu130, docs/findings.md)
DEVICE_COUNT_IN_HALF = register(Divergence(
    "torch-half-divide-by-device-count",
    "on CUDA, torch divides a float16/bfloat16 sum by a 0-d int64 count tensor on the same device "
    "(values.sum() / mask.sum()) in the sum's dtype: the count is converted to float16/bfloat16 first, so a "
    "count beyond 256 (bfloat16) or 2048 (float16) is rounded (277 -> 276 in bfloat16: a mean 1 ulp off). On "
    "the CPU, the division reads a 0-d second operand at float32 precision (it is a CPU scalar there), so the "
    "same code gives the correctly rounded mean",
    "https://github.com/pytorch/pytorch/blob/v2.11.0/aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu",
    ops=("masked_mean",), devices=("cuda",), dtypes=("float16", "bfloat16"), properties=("rounds-correctly",),
    behaviour=STOCK_TORCH,
))


@st.composite
def sized_inputs(draw, dtype: str = "float64") -> MaskedMeanInputs:
    """Values at a kernel-size boundary or past a half-precision count (2,049 and 4,097 entries), from 1-3 drawn
    values repeated with a drawn period, and a mask valid everywhere or at every k-th entry."""
    d.check_dtype(dtype)
    length = draw(st.sampled_from((2049, 4097, *SIZE_BOUNDARIES)))
    chosen = draw(st.lists(d.representable_floats(dtype, d.Magnitudes(-4, 4)), min_size=1, max_size=3))
    period = draw(st.integers(1, 5))
    values = np.array([chosen[(i // period) % len(chosen)] for i in range(length)], dtype=np.float64)
    every = draw(st.integers(1, 3))
    return MaskedMeanInputs(values, np.arange(length) % every == 0)


def masked_mean_decode_inputs(raw: dict, dtype: str) -> MaskedMeanInputs:
    values = quantize(decode_array(raw["values"]), dtype)
    mask = decode_array(raw["mask"], dtype=bool)
    if mask.shape != values.shape:
        raise ValueError(f"mask has shape {list(mask.shape)} but values have shape {list(values.shape)}")
    return MaskedMeanInputs(values, mask)


def masked_mean_encode_inputs(inputs: MaskedMeanInputs) -> dict:
    return {"values": encode_array(inputs.values), "mask": encode_array(inputs.mask)}


def masked_mean_watch_candidate(op: "Op", candidate: Any) -> Any:
    """The inputs are left unchanged; the result is a 0-d plain (strided) tensor or MaskedTensor of
    ``values.dtype`` on ``values.device`` (its gradient ``values.grad``, a plain tensor or a MaskedTensor
    of values' shape, dtype and device, is checked in :func:`differentiate`)."""
    return watch_masked_mean(op.name, candidate)


def masked_mean_rounding_bounds(inputs: MaskedMeanInputs, dtype: str, accumulation_unit: float = OPMATH_ROUNDOFF,
                                count_in_dtype: bool = False) -> dict[str, tuple[Any, Any, Any]]:
    """The value: the valid entries summed in float32 (any order), then divided by the count --
    with the sum rounded to ``dtype`` first (as torch's ``sum() / count`` does) or not;
    ``count_in_dtype``: divided by the count rounded to ``dtype`` (DEVICE_COUNT_IN_HALF)."""
    valid = inputs.values[inputs.mask]
    count = valid.size
    if count == 0 or not np.all(np.isfinite(valid)):
        return {}
    total = float(valid.sum())
    error = (count - 1) * accumulation_unit * float(np.abs(valid).sum())
    ends = [total - error, total + error]
    divisor = float(rounded(float(count), dtype)) if count_in_dtype else count
    means = np.array([s / divisor for s in ends] + [float(rounded(s, dtype)) / divisor for s in ends])
    if not np.all(np.isfinite(means)):
        return {}
    slack = np.abs(means) * 2 * OPMATH_ROUNDOFF  # the float32 division
    return {"value": (total / count, float((means - slack).min()), float((means + slack).max()))}


def masked_mean_error_bounds(inputs: MaskedMeanInputs, dtype: str, sensitivity) -> dict[str, Any]:
    """The value: a float32-accumulated sum of the valid entries over their count; the grad
    (mask / count): one rounding."""
    u, acc = DTYPES[dtype].unit_roundoff, DTYPES[dtype].accumulation_roundoff
    valid = inputs.values[inputs.mask]
    total = float(np.abs(valid[np.isfinite(valid)]).sum()) if valid.size else 0.0
    return {"value": ErrorBound(4 * u, 2 * acc * total + 2 * u * finite_abs_max(valid)),
            "grad": ErrorBound(2 * u, 0.0)}


def masked_mean_benchmark_inputs(bench, rng, dtype: str) -> MaskedMeanInputs:
    values = quantize(rng.standard_normal(bench.size), dtype)
    return MaskedMeanInputs(values, rng.random(bench.size) < bench.density)


def masked_mean_explicit_examples(dtype: str) -> list[MaskedMeanInputs]:
    """NaN at a valid entry beside a finite one (the mean is NaN: a skipna mean says 1), and
    NaN and -inf under the mask (ignored: the mean is 1, the gradient 0 there)."""
    return [MaskedMeanInputs(np.array([math.nan, 1.0, 2.0]), np.array([True, True, False])),
            MaskedMeanInputs(np.array([1.0, math.nan, -math.inf]), np.array([True, False, False]))]


def masked_mean_sizes_examples(dtype: str) -> list[MaskedMeanInputs]:
    """2,049 valid ones among 2,050 entries (float16 counts past 2,048 by 2s: a count kept in float16 is
    2,048 or 2,050), 257 valid entries (a block and one), and 65,537 valid entries of 2^-8 among 65,538 (a
    count kept in float16 is inf past 65,504; their sum, 256.004, stays finite in every dtype)."""
    return [MaskedMeanInputs(np.ones(2050), np.arange(2050) != 7),
            MaskedMeanInputs(np.resize(np.array([1.0, -0.5, 2.0]), 257), np.ones(257, dtype=bool)),
            MaskedMeanInputs(np.full(65538, 2.0 ** -8), np.arange(65538) != 11)]


def masked_mean_describe_size(inputs: MaskedMeanInputs) -> str:
    return f"{int(np.sum(inputs.mask))} valid entries of {np.size(inputs.values)}"


def masked_mean_properties(op: "Op") -> tuple[GeneratedProperty, ...]:
    return (
        GeneratedProperty("rounds-correctly", "a float16/bfloat16 mean over long masked sums is rounded as "
                          "float32 arithmetic allows", op.drawing(op.strategies.rounding)),
        GeneratedProperty("agrees-with-reference", "masked mean and its gradient match the NumPy reference",
                          op.drawing(op.strategies.inputs)),
        GeneratedProperty("ignores-masked-out", "values under the mask (NaN and inf included) change neither "
                          "the value nor the gradient", masked_pairs, check_ignores_masked_out,
                          to_cases=pair_cases),
        GeneratedProperty("grad-zero-outside-mask", "the gradient is exactly zero wherever the mask is False",
                          op.drawing(op.strategies.inputs), check_grad_zero_outside_mask),
    )


def masked_mean_reference_error_bound(inputs: MaskedMeanInputs) -> ErrorBound:
    return ErrorBound.times_default(1.0 + math.sqrt(max(1, int(inputs.mask.sum()))))


OP = Op(
    name="masked_mean",
    input_layouts={"values": LAYOUT_KINDS, "mask": LAYOUT_KINDS},
    # a sum over a non-contiguous tensor may add in another order (torch's reductions follow the strides)
    layout_reordered_outputs=frozenset({"value"}),
    stock_backend="masked",
    summary="mean over mask==True entries, and its gradient (zero where the mask is False)",
    candidate_contract="a callable (values, bool_mask) -> 0-d tensor that autograd can differentiate",
    mistakes=MISTAKES,
    # torch's own paths of the op beside the stock one: "compiled" -- the dense formulation under
    # torch.compile(dynamic=True) with Inductor, forward and backward (conformance/backends/compiled.py)
    torch_paths=(TorchPath(COMPILED, function=where_masked_mean),),
    strategies=Strategies(inputs=dtype_only(drawn_inputs), rounding=dtype_only(rounding_inputs),
                          sizes=dtype_only(sized_inputs)),
    torch_rounding_models=((DEVICE_COUNT_IN_HALF, {"count_in_dtype": True}),),
    inputs_schema={
        "type": "object", "required": ["values", "mask"], "additionalProperties": False,
        "properties": {"values": TENSOR, "mask": {"$ref": "#/$defs/bool_tensor"}},
    },
    expected_schema={
        "type": "object", "additionalProperties": False, "minProperties": 1,
        "properties": {"value": {"type": "number"}, "grad": TENSOR},
    },
    torch_implementation=torch_masked_mean,
    # the input space's dimensions it leaves out, with the reason (tests/test_configurations.py holds every op to it)
    dimensions_left_out=MappingProxyType({
        "complex": "torch's MaskedTensor, the masked backend's and the tutorial's formulation, refuses complex values "
                   "(TypeError: torch.complex64 is not supported in MaskedTensor, torch 2.13.0), though "
                   "torch.masked.mean and where(mask, v, 0).sum() / mask.sum() take them: not covered yet",
        "lifecycles": "a function of one call: no state across calls",
        "configurations": "no hyperparameters: its space is the input's (layouts, sizes, the mask's patterns)"}),
    decode_inputs=masked_mean_decode_inputs,
    encode_inputs=masked_mean_encode_inputs,
    watch_candidate=masked_mean_watch_candidate,
    rounding_bounds=masked_mean_rounding_bounds,
    error_bounds=masked_mean_error_bounds,
    benchmark_inputs=masked_mean_benchmark_inputs,
    explicit_examples=masked_mean_explicit_examples,
    sizes_examples=masked_mean_sizes_examples,
    describe_size=masked_mean_describe_size,
    properties=masked_mean_properties,
    reference_error_bound=masked_mean_reference_error_bound,
    reference=masked_mean_reference,
    run_candidate=differentiate,
)
