"""What an op record does where its declaration names no function for a code field
(:func:`conformance.ops.base.code`): each is the default of one field of :class:`~conformance.ops.base.Op`,
taking the record first (``op``: an Op, typed Any here as ops/base.py imports this module). Most say the op
has no such thing (none, empty, or an error naming the op). (``reference_error_bound``'s, assert_close's
default, is in ops/base.py: core/tolerances.py is a level below it.)"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from conformance.core.dtypes import OPMATH_ROUNDOFF
from conformance.core.layouts import STRIDED, TRANSPOSED, Layout
from conformance.core.types import RunContext



def no_decode_inputs(op: Any, raw: dict, dtype: str) -> Any:
    raise NotImplementedError(f"{op.name} cannot decode a spec's inputs")


def decode_expected(op: Any, raw: dict) -> dict[str, np.ndarray]:
    return {name: np.asarray(value, dtype=np.int64 if name in op.exact_outputs else np.float64)
            for name, value in raw.items()}


def no_encode_inputs(op: Any, inputs: Any) -> dict:
    raise NotImplementedError(f"{op.name} cannot encode its inputs")


def no_reference(op: Any, inputs: Any) -> dict[str, np.ndarray]:
    raise NotImplementedError(f"{op.name} has no reference")


def reference_itself(op: Any, inputs: Any) -> dict[str, np.ndarray]:
    return op.reference(inputs)


def no_invariants(op: Any, outputs: dict[str, Any], inputs: Any) -> None:
    return None


def no_candidate_driving(op: Any, candidate: Any, inputs: Any, ctx: RunContext) -> dict[str, Any]:
    raise NotImplementedError(f"{op.name} cannot drive a candidate")


def callable_problem(op: Any, candidate: Any) -> str | None:
    return None if callable(candidate) else f"{candidate!r} is not callable"


def candidate_itself(op: Any, candidate: Any) -> Any:
    return candidate


def no_rounding_bounds(op: Any, inputs: Any, dtype: str,
                        accumulation_unit: float = OPMATH_ROUNDOFF) -> dict[str, tuple[Any, Any, Any]]:
    return {}


def no_error_bounds(op: Any, inputs: Any, dtype: str, sensitivity: Mapping[str, float]) -> dict[str, Any]:
    raise NotImplementedError(f"{op.name} has no error bounds for generated inputs")


def no_benchmark_inputs(op: Any, bench: Any, rng: Any, dtype: str) -> Any:
    raise ValueError(f"op {op.name!r} has no benchmark inputs (Op.benchmark_inputs)")


def no_models(op: Any, inputs: Any, dtype: str) -> dict[str, dict[str, Any]]:
    return {}


def no_half_precision_model(op: Any, inputs: Any, dtype: str, accumulate: str) -> Any:
    return None


def no_properties(op: Any) -> tuple:
    return ()


def no_examples(op: Any, dtype: str) -> list:
    return []


def explicit_in_layouts(op: Any, dtype: str) -> list:
    """Each explicit example with every role that fits a 2-D view strided (offset 1, step 2), then transposed."""
    examples = []
    for inputs in op.explicit_examples(dtype)[:1]:
        for layout in (Layout(STRIDED, 1, 2), Layout(TRANSPOSED)):
            examples.append((inputs, {role: layout for role, kinds in op.input_layouts.items()
                                      if layout.kind in kinds}))
    return examples


def sizes_in_general(op: Any, inputs: Any) -> str:
    return "the inputs' sizes"

