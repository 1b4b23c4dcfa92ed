"""``coalesce``: a COO tensor in, a coalesced COO tensor out.

Contract: duplicates summed, indices sorted lexicographically and unique, explicit zeros kept,
``is_coalesced()`` true; hybrid tensors (dense trailing dims) and nnz = 0 work.
Candidate: a callable taking and returning a sparse COO tensor.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from hypothesis import strategies as st

from conformance.core.types import Mismatch, RunContext
from conformance.core.layouts import CONTIGUOUS, LAYOUT_KINDS, STRIDED, TRANSPOSED
from conformance.core.compare import assert_bits_equal, compare_outputs, finite_abs_max
from conformance.core.dtypes import DTYPES, OPMATH_ROUNDOFF
from conformance.core.tolerances import ErrorBound
from conformance.ops import draw as d
from conformance.ops.base import COMPILED, SIZE_BOUNDARIES, GeneratedProperty, Op, Strategies, TorchPath, dtype_only
from conformance.ops.contract import changed, check_like, snapshot, violation
from conformance.core.tensors import (COO, CooArray, decode_array, encode_coo, not_plain_tensor, random_coo, TENSOR,
                                      to_numpy)
# the NumPy models, and the names the optimizers' records take from here
from conformance.ops.coalesce_models import (MISTAKES, accumulation_differs, coalesce_reference,  # noqa: F401
                                             coalesce_sequential, half_accumulation_orders, round_toward_zero)


def outputs_of_sparse(result: torch.Tensor) -> dict[str, Any]:
    """The outputs the coalesce contract checks, read off a torch sparse COO tensor."""
    if not isinstance(result, torch.Tensor) or result.layout != torch.sparse_coo:
        raise Mismatch(f"coalesce must return a sparse COO tensor, got {type(result).__name__}"
                       f"{'' if not isinstance(result, torch.Tensor) else ' with layout ' + str(result.layout)}")
    return {
        "indices": result._indices(),
        "values": result._values(),
        "nnz": result._nnz(),
        "size": list(result.size()),
        "is_coalesced": bool(result.is_coalesced()),
    }


def duplicate_stats(coo: CooArray) -> tuple[int, float]:
    """(most entries at one index, largest sum of |values| at one index)."""
    if coo.indices.shape[1] == 0:
        return 1, 0.0
    _, inverse, counts = np.unique(coo.indices.T, axis=0, return_inverse=True, return_counts=True)
    sums = np.zeros((len(counts), *coo.values.shape[1:]))
    np.add.at(sums, inverse.reshape(-1), np.abs(coo.values))
    return int(counts.max()), finite_abs_max(sums)


# ---------------------------------------------------------------- generated inputs and properties

@st.composite
def rounding_inputs(draw, dtype: str) -> CooArray:
    """A 1-D COO tensor whose positions hold many equal duplicates, a large value cancelled
    around small ones, a mix, or a single value, in shuffled order."""
    d.check_dtype(dtype)
    small = d.representable_floats(dtype, d.ROUNDING_VALUES, zero=False)
    size = draw(st.integers(1, 4))
    indices: list[int] = []
    values: list[float] = []
    for position in range(size):
        kind = draw(st.sampled_from(["equal", "cancel", "mixed", "single"]))
        if kind == "equal":
            run = [draw(small)] * draw(st.integers(3, 64))
        elif kind == "cancel":
            large = draw(d.representable_floats(dtype, d.ROUNDING_LARGE, zero=False))
            run = [large, *draw(st.lists(small, min_size=1, max_size=6)), -large]
        elif kind == "mixed":
            run = draw(st.lists(small, min_size=2, max_size=24))
        else:
            run = [draw(small)]
        indices += [position] * len(run)
        values += run
    order = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).permutation(len(values))  # cheap to shrink
    return CooArray(np.array([indices], dtype=np.int64)[:, order], np.array(values, dtype=np.float64)[order],
                    (size,))


def check_idempotent(trial, coo: CooArray) -> None:
    once = trial.run(coo)
    indices = to_numpy(once["indices"])
    if indices.ndim != 2:
        raise Mismatch(f"coalesce returned indices of shape {list(indices.shape)}")
    twice = trial.run(CooArray(indices.astype(np.int64), to_numpy(once["values"]).astype(np.float64), coo.size))
    if not np.array_equal(to_numpy(twice["indices"]), indices):
        raise Mismatch(f"coalesce(coalesce(x)) changed the indices:\n  once  {indices.tolist()}\n"
                       f"  twice {to_numpy(twice['indices']).tolist()}")
    assert_bits_equal("values", twice["values"], once["values"], None, against="coalesce(x)")
    if twice.get("is_coalesced") is False:
        raise Mismatch("coalesce(coalesce(x)).is_coalesced() is False")


def idempotent_cases(coo: CooArray, dtype: str) -> list[tuple[str, CooArray]]:
    once = coalesce_reference(coo)
    return [("", coo), ("second-pass", CooArray(once["indices"], once["values"], coo.size))]


def dense_sum(coo: CooArray) -> np.ndarray:
    if coo.sparse_dim == 0:  # every entry is at the one empty index: the dense tensor is their sum
        return coo.values.sum(axis=0) if coo.values.shape[0] else np.zeros(coo.size, dtype=np.float64)
    dense = np.zeros(coo.size, dtype=np.float64)
    np.add.at(dense, tuple(coo.indices), coo.values)
    return dense


def check_dense_sum(trial, coo: CooArray) -> None:
    outputs = trial.run(coo)
    trial.op.check_invariants(outputs, coo)  # sorted, unique, is_coalesced
    indices = to_numpy(outputs["indices"]).astype(np.int64)
    # check_invariants made sure indices are (sparse_dim, nnz): with sparse_dim 0 a reshape could not tell nnz
    result = CooArray(indices, to_numpy(outputs["values"]).astype(np.float64), coo.size)
    tols = {"dense": trial.tolerances(coo)["values"]}

    def model():
        emulated = trial.emulate(coo)
        return {"dense": dense_sum(CooArray(emulated["indices"], emulated["values"], coo.size))}

    trial.compare({"dense": dense_sum(result)}, {"dense": dense_sum(coo)}, tols, coo,
                  against="the dense sum of the input's entries", model=model)


# complex values (torch's test_coalesce runs cdouble): the real dtype's complex twin
COMPLEX_OF = MappingProxyType({"float32": torch.complex64, "float64": torch.complex128})


def as_complex(coo: CooArray) -> CooArray:
    """``coo`` with an imaginary part: each entry's value plus i times the entry's before it (``np.roll``),
    so that duplicates differ in both parts."""
    return CooArray(coo.indices, coo.values + 1j * np.roll(coo.values, 1, axis=0), coo.size)


def check_complex_coalesce(trial, coo: CooArray) -> None:
    """coalesce of complex values: the real input's indices, each value's real and imaginary parts the sums of
    its duplicates' (the reference on each part), within the dtype's tolerance for the larger of the two."""
    name = str(COMPLEX_OF[trial.dtype]).replace("torch.", "")
    complex_coo = as_complex(coo)
    outputs = trial.backend.run(trial.op.name, complex_coo, RunContext(trial.device, COMPLEX_OF[trial.dtype]))
    trial.op.check_invariants(outputs, coo)
    got = to_numpy(outputs["values"])
    if not np.iscomplexobj(got):
        raise Mismatch(f"{name}: coalesce returned {got.dtype} values for {name} ones: the imaginary parts are lost")
    real = coalesce_reference(CooArray(coo.indices, complex_coo.values.real.copy(), coo.size))
    imag = coalesce_reference(CooArray(coo.indices, complex_coo.values.imag.copy(), coo.size))
    if not np.array_equal(to_numpy(outputs["indices"]), real["indices"]):
        raise Mismatch(f"{name}: indices {to_numpy(outputs['indices']).tolist()}, the reference's "
                       f"{real['indices'].tolist()}")
    magnitudes = CooArray(coo.indices, np.abs(complex_coo.values.real) + np.abs(complex_coo.values.imag), coo.size)
    tolerance = trial.tolerances(magnitudes)["values"]
    compare_outputs({"values.real": got.real, "values.imag": got.imag},
                    {"values.real": real["values"], "values.imag": imag["values"]},
                    {"values.real": tolerance, "values.imag": tolerance},
                    against=f"the NumPy reference on each part of the {name} values")


@st.composite
def sized_coo(draw, dtype: str) -> CooArray:
    """An uncoalesced COO tensor past a kernel-size boundary (SIZE_BOUNDARIES): a hybrid one whose dense part
    is a row of that width, 1-6 entries over 1-4 rows (duplicates summed row by row), or a 1-D one with that
    many entries over 1-8 indices (long runs of duplicates). Values from 1-3 drawn ones, repeated."""
    d.check_dtype(dtype)
    width = draw(st.sampled_from(SIZE_BOUNDARIES))
    chosen = np.array(draw(st.lists(d.representable_floats(dtype, d.Magnitudes(-2, 3)), min_size=1, max_size=3)))
    if draw(st.booleans()):
        rows, nnz = draw(st.integers(1, 4)), draw(st.integers(1, 6))
        indices = np.array([draw(st.lists(st.integers(0, rows - 1), min_size=nnz, max_size=nnz))], dtype=np.int64)
        values = chosen[np.arange(nnz * width) % len(chosen)].reshape(nnz, width)
        return CooArray(indices, values, (rows, width))
    slots = draw(st.integers(1, 8))
    indices = ((np.arange(width) * draw(st.sampled_from([1, 3, 5]))) % slots).reshape(1, -1).astype(np.int64)
    return CooArray(indices, chosen[np.arange(width) % len(chosen)], (slots,))


def watch_coalesce(op_name: str, candidate: Any):
    """``candidate`` wrapped in the clauses of coalesce's contract (:meth:`Coalesce.watch_candidate`)."""
    def watched(tensor: torch.Tensor):
        before = snapshot(tensor)
        result = candidate(tensor)
        change = changed(tensor, before)
        if change:
            raise violation(op_name, "the input tensor is left unchanged", change)
        problem = not_plain_tensor(result, torch.sparse_coo)
        if problem:
            raise violation(op_name, "the result is a sparse COO torch.Tensor", problem)
        check_like(op_name, result, tensor, subject="the result", owner="the input's", owner_is="the input is")
        return result

    return watched


def coalesced(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor.coalesce()``: what the ``compiled`` backend hands torch.compile (the record's ``torch_paths``).
    Dynamo does not trace it on torch 2.13 -- it will not wrap a sparse input ("Attempted to wrap sparse
    Tensor: torch.compile does not support sparse Tensors", gb0015), skips the frame and runs it eagerly --
    so the compiled items are unsupported with that reason (tests/test_compiled_path.py)."""
    return tensor.coalesce()


def coalesce_decode_inputs(raw: dict, dtype: str) -> CooArray:
    return CooArray.decode(raw["tensor"]).quantized(dtype)


def coalesce_decode_expected(op: "Op", raw: dict) -> dict[str, np.ndarray]:
    decoded = {}
    for name, value in raw.items():
        decoded[name] = decode_array(value, dtype=np.int64 if name in op.exact_outputs else np.float64)
    return decoded


def coalesce_encode_inputs(inputs: CooArray) -> dict:
    return {"tensor": encode_coo(inputs)}


def coalesce_check_invariants(outputs: dict[str, Any], inputs: CooArray) -> None:
    if outputs.get("is_coalesced") is False:
        raise Mismatch("the result's is_coalesced() is False")
    indices = to_numpy(outputs["indices"])
    if indices.ndim != 2 or indices.shape[0] != inputs.sparse_dim:
        raise Mismatch(f"indices must have shape ({inputs.sparse_dim}, nnz), got {indices.shape}")
    if indices.shape[1] > 1:
        rows = [tuple(col) for col in indices.T.tolist()]
        for position, (left, right) in enumerate(zip(rows, rows[1:])):
            if not left < right:
                raise Mismatch(
                    f"indices are not sorted and unique: entry {position} {left} is not before "
                    f"entry {position + 1} {right}")


def coalesce_run_candidate(candidate, inputs: CooArray, ctx: RunContext) -> dict[str, Any]:
    tensor = inputs.to_torch(ctx.dtype, ctx.torch_device, place=ctx.place)
    return outputs_of_sparse(candidate(tensor))


def coalesce_watch_candidate(op: "Op", candidate: Any) -> Any:
    """The input tensor is left unchanged; the result is a sparse COO ``torch.Tensor`` (not a dense
    one, not a MaskedTensor) of the input's dtype, device and size."""
    return watch_coalesce(op.name, candidate)


def coalesce_rounding_bounds(inputs: CooArray, dtype: str,
                             accumulation_unit: float = OPMATH_ROUNDOFF) -> dict[str, tuple[Any, Any, Any]]:
    """Each sum of duplicates, accumulated in float32 (any order) and rounded once."""
    if inputs.indices.shape[1] == 0 or inputs.sparse_dim == 0:
        return {}
    exact = coalesce_reference(inputs)["values"]
    _, inverse, counts = np.unique(inputs.indices.T, axis=0, return_inverse=True, return_counts=True)
    magnitude = np.zeros((len(counts), *inputs.values.shape[1:]))
    np.add.at(magnitude, inverse.reshape(-1), np.abs(inputs.values))
    error = (counts - 1).reshape(-1, *([1] * (inputs.values.ndim - 1))) * accumulation_unit * magnitude
    return {"values": (exact, exact - error, exact + error)}


def coalesce_error_bounds(op: "Op", inputs: CooArray, dtype: str, sensitivity) -> dict[str, Any]:
    """Each sum of k duplicates: one rounding to ``dtype`` and k accumulation roundoffs."""
    k, biggest_sum = duplicate_stats(inputs)
    return {**{name: None for name in op.exact_outputs},
            "values": ErrorBound(2 * DTYPES[dtype].unit_roundoff,
                                 2 * k * DTYPES[dtype].accumulation_roundoff * biggest_sum)}


def coalesce_benchmark_inputs(bench, rng, dtype: str) -> CooArray:
    sparse_dims = bench.sparse_dims if bench.sparse_dims is not None else len(bench.size)
    return random_coo(rng, bench.size, sparse_dims, bench.density, dtype)


def coalesce_half_accumulation_models(inputs: CooArray, dtype: str) -> dict[str, dict[str, np.ndarray]]:
    """Stock torch's half-precision accumulation (pytorch#84471), duplicates summed in ``dtype`` one
    after another, in each order of :func:`half_accumulation_orders`: {order: outputs}."""
    if dtype not in ("float16", "bfloat16") or not inputs.indices.shape[1]:
        return {}
    models = {}
    for name, order in half_accumulation_orders(inputs).items():
        result = coalesce_sequential(inputs, dtype, order=order)
        models[name] = {"indices": result.indices, "values": result.values}
    return models


def coalesce_half_precision_model(inputs: CooArray, dtype: str, accumulate: str):
    flags = {"accumulation"} if accumulation_differs(inputs, dtype) else set()
    result = coalesce_sequential(inputs, accumulate, round_to=dtype)
    return {"indices": result.indices, "values": result.values, "nnz": np.int64(result.indices.shape[1]),
            "size": np.array(inputs.size, dtype=np.int64)}, flags


def coalesce_explicit_examples(dtype: str) -> list[CooArray]:
    """Two sparse dims, unsorted, with a duplicate and a pair that cancels to an explicit zero:
    row-major vs column-major order, sum vs last write, keeping vs dropping the zero all differ
    (values exact in every dtype). Then a 0-d sparse scalar with duplicates (sparse_dim == 0)."""
    two_dims = CooArray(np.array([[1, 0, 2, 1, 0, 2], [0, 2, 2, 0, 1, 2]], dtype=np.int64),
                        np.array([1.0, 2.0, 5.0, 3.0, -4.0, -5.0]), (3, 3))
    scalar = CooArray(np.zeros((0, 2), dtype=np.int64), np.array([1.5, 2.0]), ())
    return [two_dims, scalar]


def coalesce_properties(op: "Op") -> tuple[GeneratedProperty, ...]:
    inputs = op.drawing(op.strategies.inputs)
    return (
        GeneratedProperty("agrees-with-reference", "coalesce matches the NumPy reference (indices exact, values "
                          "within a tolerance for the dtype)", inputs),
        GeneratedProperty("idempotent", "coalesce(coalesce(x)) is bit-for-bit coalesce(x)", inputs,
                          check_idempotent, to_cases=idempotent_cases),
        GeneratedProperty("sorted-dense-sum", "coalesce's indices are sorted and unique, and its entries sum to "
                          "the dense sum of the input", inputs, check_dense_sum),
        GeneratedProperty("rounds-correctly", "float16/bfloat16 sums of duplicates are correctly rounded (many "
                          "equal duplicates, cancelling pairs)", op.drawing(op.strategies.rounding)),
        GeneratedProperty("complex-agrees", "coalesce of complex values (complex64 for float32 items, complex128 "
                          "for float64) sums each part of the duplicates as the reference does", inputs,
                          check_complex_coalesce, dtypes=tuple(COMPLEX_OF), skip_backends=("reference",)),
    )


def coalesce_describe_size(inputs: CooArray) -> str:
    dense = f" of dense rows of {inputs.values.shape[1]}" if inputs.values.ndim > 1 else ""
    return f"{inputs.indices.shape[1]} entries{dense} at {np.unique(inputs.indices.T, axis=0).shape[0]} indices"


def coalesce_reference_error_bound(inputs: CooArray) -> ErrorBound:
    # a sum of k duplicates may carry up to k roundings in low precision
    if inputs.indices.shape[1] == 0:
        return ErrorBound.times_default(1.0)
    _, counts = np.unique(inputs.indices.T, axis=0, return_counts=True)
    return ErrorBound.times_default(float(max(1, counts.max())))


OP = Op(
    name="coalesce",
    # the input's indices (sparse_dim, nnz) and values (nnz, *dense): torch keeps a non-contiguous one as given
    input_layouts={"indices": (CONTIGUOUS, STRIDED, TRANSPOSED), "values": LAYOUT_KINDS},
    decodes_empty_expected=True,
    stock_backend="coo",
    summary="COO tensor -> coalesced COO tensor (duplicates summed, indices sorted)",
    candidate_contract="a callable taking and returning a sparse COO tensor",
    mistakes=MISTAKES,
    torch_sums_duplicates_in_half=True,
    # torch's own paths of the op beside the stock one: "compiled" -- coalesce() under torch.compile
    # (conformance/backends/compiled.py), unsupported where Dynamo does not trace a sparse tensor
    torch_paths=(TorchPath(COMPILED, function=coalesced),),
    strategies=Strategies(inputs=dtype_only(d.coo_arrays), rounding=dtype_only(rounding_inputs),
                          sizes=dtype_only(sized_coo)),
    # the input space's dimensions it leaves out, with the reason (tests/test_configurations.py holds every op to it)
    dimensions_left_out=MappingProxyType({
        "lifecycles": "a function of one tensor: no state across calls, nothing joins or leaves",
        "configurations": "no hyperparameters: its space is the input's (layouts, sizes, complex values)"}),
    inputs_schema={
        "type": "object",
        "required": ["tensor"],
        "additionalProperties": False,
        "properties": {"tensor": COO},
    },
    expected_schema={
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "properties": {
            "indices": TENSOR,
            "values": TENSOR,
            "nnz": {"type": "integer", "minimum": 0},
            "size": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        },
    },
    exact_outputs=frozenset({"indices", "nnz", "size"}),
    torch_implementation=torch.Tensor.coalesce,
    decode_inputs=coalesce_decode_inputs,
    decode_expected=coalesce_decode_expected,
    encode_inputs=coalesce_encode_inputs,
    check_invariants=coalesce_check_invariants,
    run_candidate=coalesce_run_candidate,
    watch_candidate=coalesce_watch_candidate,
    rounding_bounds=coalesce_rounding_bounds,
    error_bounds=coalesce_error_bounds,
    benchmark_inputs=coalesce_benchmark_inputs,
    half_accumulation_models=coalesce_half_accumulation_models,
    half_precision_model=coalesce_half_precision_model,
    explicit_examples=coalesce_explicit_examples,
    properties=coalesce_properties,
    describe_size=coalesce_describe_size,
    reference_error_bound=coalesce_reference_error_bound,
    reference=coalesce_reference,
)
