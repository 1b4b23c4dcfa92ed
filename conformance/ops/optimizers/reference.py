"""The float64 side of the optimizer ops: a step's gradient as a dense array and the mask of the
entries it specifies (what the NumPy references are written on), densified trajectories, and the
rounding bounds and the trajectory error bounds around the references (data: conformance.core.tolerances
makes the tolerances of them)."""

from __future__ import annotations

from typing import Mapping

from dataclasses import dataclass

import numpy as np

from conformance.core.compare import finite_abs_max
from conformance.core.dtypes import DTYPES, OPMATH_ROUNDOFF
from conformance.ops.optimizers.inputs import OptimizerInputs
from conformance.core.tensors import CooArray, quantize
from conformance.core.tolerances import ErrorBound


def dense_grad_and_mask(grad: CooArray | np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(summed dense gradient, mask broadcast to ``shape``) of one step, in float64 NumPy."""
    if isinstance(grad, np.ndarray):
        return grad.astype(np.float64), np.ones(shape, dtype=bool)
    index = tuple(grad.indices)
    dense = np.zeros(shape, dtype=np.float64)
    np.add.at(dense, index, grad.values)  # duplicates summed in float64 in the order written (as coalesce_reference)
    mask = np.zeros(shape, dtype=bool)
    mask[index] = True
    return dense, mask


def densified(inputs: OptimizerInputs, dtype: str) -> OptimizerInputs:
    """The same trajectory with every sparse gradient summed (float64, rounded once) into a dense one."""
    grads = [quantize(dense_grad_and_mask(g, inputs.param.shape)[0], dtype) if isinstance(g, CooArray)
             else g for g in inputs.grads]
    return OptimizerInputs(inputs.param, grads, inputs.hyperparameters)


def duplicate_sums_shifted(inputs: OptimizerInputs, unit: float) -> list[OptimizerInputs]:
    """The trajectory twice, each sparse gradient coalesced (float64 sums) with every duplicate sum shifted
    up, then down, by the bound on summing its k terms in another order in arithmetic of unit roundoff
    ``unit``: (k - 1) * unit * the sum of the terms' magnitudes (Higham, Accuracy and Stability of
    Numerical Algorithms, 4.2). Empty where no gradient has duplicates."""
    from conformance.ops.coalesce import coalesce_reference  # here: a level less for this module (tests/test_layout.py)

    up: list[CooArray | np.ndarray] = []
    down: list[CooArray | np.ndarray] = []
    shifted = False
    for grad in inputs.grads:
        if isinstance(grad, CooArray) and grad.indices.shape[1] > 1:
            counts = coalesce_reference(CooArray(grad.indices, np.ones(grad.indices.shape[1]), grad.size))["values"]
            if counts.max() > 1:
                summed = coalesce_reference(grad)
                magnitudes = coalesce_reference(CooArray(grad.indices, np.abs(grad.values), grad.size))["values"]
                bound = ((counts - 1) * unit).reshape(-1, *[1] * (magnitudes.ndim - 1)) * magnitudes
                up.append(CooArray(summed["indices"], summed["values"] + bound, grad.size))
                down.append(CooArray(summed["indices"], summed["values"] - bound, grad.size))
                shifted = True
                continue
        up.append(grad)
        down.append(grad)
    if not shifted:
        return []
    return [OptimizerInputs(inputs.param, up, inputs.hyperparameters),
            OptimizerInputs(inputs.param, down, inputs.hyperparameters)]


def single_step_param_bounds(inputs: OptimizerInputs, reference_param: np.ndarray, dtype: str,
                             intermediates: int) -> dict[str, tuple]:
    """The parameter after one sparse step without duplicate indices: its exact value, widened by
    the rounding of the ``intermediates`` values the update is computed from (each off by at most
    one unit roundoff of ``dtype``, torch stores them in the parameter's dtype) and by float32
    arithmetic. Empty for other inputs (trajectories compound their roundings)."""
    if inputs.steps != 1 or not isinstance(inputs.grads[0], CooArray):
        return {}
    grad = inputs.grads[0]
    if grad.indices.shape[1] != np.unique(grad.indices.T, axis=0).shape[0]:
        return {}  # duplicates: torch sums them in half precision (a known divergence of its own)
    exact = np.asarray(reference_param, dtype=np.float64)
    update = np.abs(exact - inputs.param)
    slack = intermediates * DTYPES[dtype].unit_roundoff * update + 4 * OPMATH_ROUNDOFF * np.abs(exact)
    return {"param": (exact, exact - slack, exact + slack)}


@dataclass
class TrajectoryBounds:
    """What an optimizer's per-output error bounds are made of (see :func:`trajectory_bounds`)."""

    u: float  # the dtype's unit roundoff
    steps: int
    growth: float  # relative error grown over the trajectory
    g_max: float  # largest |gradient| entry
    sensitivity: dict[str, float]


PREFIXES = 24  # at most this many prefixes of a trajectory are run for its scale (a long one: every k-th)


def _trajectory_scale(reference, inputs: OptimizerInputs) -> tuple[float, float]:
    """(largest |param| along the reference trajectory, largest single-step |update|). A long
    trajectory is sampled every k-th step (at most PREFIXES reference runs, each a prefix): its
    update bound is then the largest change over k steps, never below a single step's (a looser
    tolerance, never a tighter one)."""
    param = inputs.param
    biggest, update = finite_abs_max(param), 0.0
    stride = max(1, -(-inputs.steps // PREFIXES))
    for steps in [*range(stride, inputs.steps, stride), inputs.steps] if inputs.steps else []:
        try:
            new = reference(OptimizerInputs(inputs.param, inputs.grads[:steps], inputs.hyperparameters))["param"]
        except Exception:
            break
        biggest = max(biggest, finite_abs_max(new))
        with np.errstate(invalid="ignore"):
            update = max(update, finite_abs_max(np.asarray(new) - np.asarray(param)))
        param = new
    return biggest, update


def trajectory_bounds(reference, inputs: OptimizerInputs, dtype: str,
                      sensitivity: Mapping[str, float]) -> tuple[dict[str, ErrorBound], TrajectoryBounds]:
    """The parameter's and step's error bounds along an optimizer trajectory (``reference``: the
    op's float64 reference), and what the op's own state bounds are made from."""
    u, steps = DTYPES[dtype].unit_roundoff, max(1, inputs.steps)
    biggest, update = _trajectory_scale(reference, inputs)
    grads = [dense_grad_and_mask(g, inputs.param.shape)[0] for g in inputs.grads]
    g_max = max((finite_abs_max(g) for g in grads), default=0.0)
    growth = 4 * u * (steps + 1)
    return {
        "param": ErrorBound(growth, 4 * u * steps * (biggest + (steps + 4) * update) + 4 * sensitivity.get("param", 0.0)),
        "step": ErrorBound(0.0, 0.0),
    }, TrajectoryBounds(u, steps, growth, g_max, dict(sensitivity))
