"""What an op is: its contract (input and output schema), its NumPy reference, and how a
user-supplied candidate implementation of it is driven."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from conformance.types import RunContext

TENSOR = {"$ref": "#/$defs/tensor"}
COO = {"$ref": "#/$defs/coo"}


class Op:
    """Base class of the ops under test; one subclass per module in ``conformance.ops``."""

    name: str = ""
    summary: str = ""
    candidate_contract: str = ""
    inputs_schema: dict = {}
    expected_schema: dict = {}
    exact_outputs: frozenset[str] = frozenset()
    # stock torch sums the duplicates of a float16/bfloat16 COO tensor in that dtype (pytorch#84471)
    torch_sums_duplicates_in_half: bool = False
    # optimizers: output name -> the optimizer's state key it is read from (empty: not an optimizer)
    state_outputs: dict[str, str] = {}
    # the built-in backend that is stock torch's own way of doing this op: the column a candidate is
    # read against in reports, run beside it by `conformance check`
    stock_backend: str | None = None
    # the counterexample script's run() for this op: conformance/cases/repro/run/<repro_run>.py
    repro_run: str | None = None

    @property
    def state_tensors(self) -> tuple[str, ...]:
        """The state outputs that are tensors of the parameter's shape (``step`` left out)."""
        return tuple(name for name in self.state_outputs if name != "step")

    @property
    def torch_implementation(self) -> Any:
        """Stock torch's implementation of this op, in the form ``run_candidate`` drives (None: no
        single torch function does it). A candidate is also judged against what it returns."""
        return None

    def decode_inputs(self, raw: dict, dtype: torch.dtype) -> Any:
        """Spec inputs -> NumPy inputs, floats rounded to ``dtype`` (raises ValueError)."""
        raise NotImplementedError

    def decode_expected(self, raw: dict) -> dict[str, np.ndarray]:
        """Spec golden values -> NumPy arrays keyed by output name."""
        return {name: np.asarray(value, dtype=np.int64 if name in self.exact_outputs else np.float64)
                for name, value in raw.items()}

    def reference(self, inputs: Any) -> dict[str, np.ndarray]:
        """The independent NumPy float64 oracle (no torch math)."""
        raise NotImplementedError

    def check_invariants(self, outputs: dict[str, Any], inputs: Any) -> None:
        """Properties every correct output has, whatever the inputs (raise Mismatch)."""

    def run_candidate(self, candidate: Any, inputs: Any, ctx: RunContext) -> dict[str, Any]:
        """Drive a user-supplied implementation of this op through its contract."""
        raise NotImplementedError

    def candidate_problem(self, candidate: Any) -> str | None:
        """Why ``candidate`` cannot fit this op's contract, or None."""
        return None if callable(candidate) else f"{candidate!r} is not callable"

    def rounding_bounds(self, inputs: Any, dtype: torch.dtype,
                        accumulation_unit: float = 2.0**-24) -> dict[str, tuple[Any, Any, Any]]:
        """For float16/bfloat16: per output, ``(exact, low, high)`` -- the float64 result and the
        interval a correct implementation's value lies in before its last rounding to ``dtype``
        (see :mod:`conformance.rounding`), with sums accumulated at ``accumulation_unit`` (float32's
        unit roundoff; the dtype's own models torch's half-precision accumulation). Empty where the
        op, or these inputs, have no such model."""
        return {}

    def generated_tolerances(self, inputs: Any, dtype: str,
                             sensitivity: Callable[[], dict[str, float]]) -> dict[str, Any]:
        """Per-output tolerance (``conformance.compare.Tolerance``; None: exact) for a ``dtype``
        backend against the float64 reference on generated ``inputs``: the usual bounds of the
        arithmetic a correct implementation does in ``dtype`` (storage roundoff; sums accumulated
        in float32 for half dtypes) times a small safety factor, never below assert_close's
        defaults. ``sensitivity()`` is how far torch's algorithm replayed in ``dtype`` lands from
        the reference, per output (ill-conditioned trajectories widen by it)."""
        raise NotImplementedError(f"{self.name} has no tolerances for generated inputs")

    def benchmark_inputs(self, bench: Any, rng: Any, dtype: torch.dtype) -> Any:
        """Inputs for a spec's benchmark section ``bench`` (size, density, sparse_dims, steps,
        hyperparameters), drawn from the NumPy generator ``rng``."""
        raise ValueError(f"op {self.name!r} has no benchmark inputs (Op.benchmark_inputs)")

    def half_precision_model(self, inputs: Any, dtype: str, accumulate: str):
        """Stock torch's result computed the way torch rounds in ``dtype``, duplicates summed at
        ``accumulate``, and the flags of what that rounding did ("accumulation": the duplicates'
        sum differs from the correctly rounded one; "underflow": float16's eps or g**2
        underflowed): ``(outputs, flags)``, or None where this op has no such model (the known
        divergences of conformance/cases/lowprec.py are judged from it)."""
        return None

    def reference_tolerance_scale(self, inputs: Any) -> float:
        """How much looser than assert_close's dtype default the reference cross-check is."""
        return 1.0
