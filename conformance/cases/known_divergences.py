"""Known divergences of particular built-in backends, as models of what they compute.

The hand-written specs list known divergences per case; generated inputs need them per
backend. Each entry here names the backends (and devices) it concerns and a NumPy model of the
divergent behaviour. A generated example on which such a backend misses the contract but
*matches the model* is reported as that known divergence (xfail, with the reason); an output
that matches neither is a failure. Stock torch's half-precision behaviour is in
:mod:`conformance.cases.lowprec`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from conformance.cases.lowprec import Divergence
from conformance.rounding import TOWARD_ZERO
from conformance.ops.masked_mean import MaskedMeanInputs, masked_mean_reference

MULTIPLY_LETS_NAN_THROUGH = Divergence(
    "multiply-lets-nan-through",
    "the note's multiply idiom, sum(values * mask) / count, lets a NaN or inf under the mask through "
    "(NaN * 0 = inf * 0 = NaN), and with no valid entry its gradient is mask * (1 / 0) = 0 * inf = NaN; "
    "masking the gradient afterwards (hook, zero-grad) multiplies NaN by 0 again",
    None,
)
FUNCTION_NAN_GRAD = Divergence(
    "masked-mean-function-nan-grad",
    "the note's MaskedMean backward, grad_output * is_valid / is_valid.sum(), is 0 / 0 = NaN at every entry "
    "when no entry is valid",
    None,
)


def _multiply_model(inputs: MaskedMeanInputs) -> dict[str, np.ndarray]:
    count = inputs.mask.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.sum(inputs.values * inputs.mask) / count
        grad = inputs.mask / count * inputs.mask
    return {"value": np.float64(value), "grad": grad}


def _function_model(inputs: MaskedMeanInputs) -> dict[str, np.ndarray]:
    count = inputs.mask.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        grad = inputs.mask / count
    return {"value": masked_mean_reference(inputs)["value"], "grad": grad}


@dataclass(frozen=True)
class BackendDivergence:
    divergence: Divergence
    op: str
    backends: tuple[str, ...]
    devices: tuple[str, ...] | None
    model: Callable[[Any], dict[str, np.ndarray]]

    def applies_to(self, op: str, backend: str, device: str) -> bool:
        return op == self.op and backend in self.backends and (self.devices is None or device in self.devices)


BACKEND_DIVERGENCES: tuple[BackendDivergence, ...] = (
    # on xla the compiler rewrites x * convert(mask) into a select, and the result is right
    BackendDivergence(MULTIPLY_LETS_NAN_THROUGH, "masked_mean", ("mean-multiply", "mean-hook", "mean-zero-grad"),
                      ("cpu", "cuda"), _multiply_model),
    BackendDivergence(FUNCTION_NAN_GRAD, "masked_mean", ("mean-function",), ("cpu", "cuda"), _function_model),
)


TRITON_INTERPRETER_BF16_TRUNCATION = Divergence(
    "triton-interpreter-bfloat16-truncation",
    "Triton's interpreter (TRITON_INTERPRET=1, the kernels' CPU path) converts float32 to bfloat16 by "
    "truncation, ignoring fp_downcast_rounding='rtne' (triton 3.9.0: 1.1298828125 -> 1.125, where "
    "round-to-nearest-even gives 1.1328125); compiled Triton on a GPU rounds to nearest even",
    None,
)


@dataclass(frozen=True)
class RoundingDivergence:
    """A backend that rounds ``dtypes`` in another ``mode`` than round-to-nearest-even on ``devices``."""

    divergence: Divergence
    backends: tuple[str, ...]
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    mode: str

    def applies_to(self, backend: str, device: str, dtype: str) -> bool:
        return backend in self.backends and device in self.devices and dtype in self.dtypes


ROUNDING_DIVERGENCES: tuple[RoundingDivergence, ...] = (
    RoundingDivergence(TRITON_INTERPRETER_BF16_TRUNCATION, ("kernel-triton",), ("cpu",), ("bfloat16",),
                       TOWARD_ZERO),
)


def rounding_for_backend(backend: str, device: str, dtype: str) -> RoundingDivergence | None:
    return next((entry for entry in ROUNDING_DIVERGENCES if entry.applies_to(backend, device, dtype)), None)


def for_backend(op: str, backend: str, device: str) -> list[BackendDivergence]:
    return [entry for entry in BACKEND_DIVERGENCES if entry.applies_to(op, backend, device)]


# ---------------------------------------------------------------- several param groups

GROUP_INITIAL_ACCUMULATOR = Divergence(
    "adagrad-group-initial-accumulator-ignored",
    "torch.optim.Adagrad fills every parameter's state_sum with the constructor's initial_accumulator_value "
    "(torch/optim/adagrad.py, __init__), so a param group's own initial_accumulator_value is kept in "
    "param_groups but never used; param groups are documented to override the constructor's defaults",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/torch/optim/adagrad.py",
)


@dataclass(frozen=True)
class GroupDivergence:
    """Stock torch's behaviour with several param groups, as the inputs it effectively runs: each
    parameter alone on ``model(inputs)`` gives what the grouped run gives."""

    divergence: Divergence
    op: str
    model: Callable[[Any], Any]


def _constructor_initial_accumulator(inputs):
    from conformance.ops.optimizer_steps import OptimizerInputs, ParamGroupsInputs

    def default(member):
        if not isinstance(member, OptimizerInputs):
            return member
        hyper = {k: v for k, v in member.hyperparameters.items() if k != "initial_accumulator_value"}
        return OptimizerInputs(member.param, member.grads, hyper)

    return ParamGroupsInputs([[default(m) for m in group] for group in inputs.groups])


GROUP_DIVERGENCES = (GroupDivergence(GROUP_INITIAL_ACCUMULATOR, "adagrad", _constructor_initial_accumulator),)
