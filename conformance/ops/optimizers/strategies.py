"""The Hypothesis strategies every optimizer op shares: trajectories with valid hyperparameters
(the op's own ``strategies.hyperparameters``), param groups, resume points, rounding inputs, and the
pieces the records' invalid-input strategies are made of."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from hypothesis import strategies as st

from conformance.core.dtypes import DTYPES
from conformance.ops import draw as d
from conformance.ops.base import SIZE_BOUNDARIES, Strategies
from conformance.ops.optimizers.inputs import LifecycleInputs, Member, OptimizerInputs, ParamGroupsInputs, empty_gradient
from conformance.core.tensors import CooArray


class OptimizerOp(Protocol):
    """What these strategies read of an optimizer record (conformance.ops.optimizers.base.OptimizerOp, which
    imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def strategies(self) -> Strategies: ...

    @property
    def takes_dense_gradients(self) -> bool: ...

    def accepts_dense_steps(self, hyperparameters: dict) -> bool: ...

    def rounding_hyperparameters(self, draw: Any) -> dict: ...


def _hyperparameters(op: OptimizerOp) -> st.SearchStrategy:
    """The record's strategy of valid hyperparameters (every optimizer record declares one)."""
    assert op.strategies.hyperparameters is not None, f"{op.name} declares no strategies.hyperparameters"
    return op.strategies.hyperparameters()


@st.composite
def drawn_inputs(draw, op: OptimizerOp, dtype: str = "float64", *, max_steps: int = 4,
                 hyperparameters: Any = None) -> OptimizerInputs:
    """A parameter (1-3 dims), a gradient trajectory and valid hyperparameters for ``op`` (drawn
    from ``hyperparameters`` when given, else from ``op.strategies.hyperparameters()``)."""
    d.check_dtype(dtype)
    size = draw(d.shapes(1, 3, 1, 4, max_numel=24))
    sparse_dim = draw(st.integers(1, len(size)))
    param = d.dense_values(draw, size, d.representable_floats(dtype, d.PARAM_MAGNITUDES[dtype]))
    hyper = draw(hyperparameters if hyperparameters is not None else _hyperparameters(op))
    grads = draw(d.trajectories(dtype, size, sparse_dim, max_steps=max_steps,
                                dense_steps=op.accepts_dense_steps(hyper)))
    return OptimizerInputs(param, grads, hyper)


LONG_STEPS = (100, 120)  # a long trajectory's steps: where a hyperparameter rounded once drifts past the tolerance
LONG_EXAMPLES = 10  # drawn long trajectories per item, beside the explicit ones (each runs 100+ torch steps)


@st.composite
def long_trajectories(draw, op: OptimizerOp, dtype: str = "float64") -> OptimizerInputs:
    """A trajectory of 100-160 steps: a short drawn one (its parameter, hyperparameters and
    gradients) repeated, so that an error made once per step -- momentum or 1 - beta2 computed in
    float32 -- accumulates over as many steps as a training run's first few hundred."""
    short = draw(drawn_inputs(op, dtype, max_steps=3))
    steps = draw(st.integers(*LONG_STEPS))
    grads = [short.grads[i % short.steps] for i in range(steps)] if short.grads else short.grads
    return OptimizerInputs(short.param, grads, short.hyperparameters)


def _padded(inputs: OptimizerInputs, steps: int) -> OptimizerInputs:
    """``inputs`` with empty sparse gradients appended up to ``steps`` steps."""
    empty = empty_gradient(inputs.param.shape)
    return OptimizerInputs(inputs.param, [*inputs.grads, *[empty] * (steps - inputs.steps)], inputs.hyperparameters)


@st.composite
def param_groups(draw, op: OptimizerOp, dtype: str = "float64", *, min_steps: int = 1) -> "ParamGroupsInputs":
    """Two param groups with their own hyperparameters: the first holds one parameter, the second
    a parameter of another shape and one that never gets a gradient (as torch's OptimizerInfo
    tests). The trajectories are padded with empty gradients to the same number of steps."""
    first, second = draw(drawn_inputs(op, dtype, max_steps=3)), draw(drawn_inputs(op, dtype, max_steps=3))
    steps = max(min_steps, first.steps, second.steps)
    idle = d.dense_values(draw, draw(d.shapes(1, 2, 1, 3)), d.representable_floats(dtype, d.PARAM_MAGNITUDES[dtype]))
    return ParamGroupsInputs([[_padded(first, steps)], [_padded(second, steps), idle]])


@st.composite
def resume_points(draw, op: OptimizerOp, dtype: str = "float64") -> tuple["ParamGroupsInputs", int]:
    """Param groups (:func:`param_groups`, at least two steps) and the step after which the
    optimizer's state_dict is saved and loaded into a fresh optimizer."""
    inputs = draw(param_groups(op, dtype, min_steps=2))
    return inputs, draw(st.integers(1, inputs.steps - 1))


@st.composite
def rounding_inputs(draw, op: OptimizerOp, dtype: str) -> OptimizerInputs:
    """One sparse step without duplicate indices on a parameter of magnitude 1..8, with a learning
    rate that moves it by 0.05 to 20 ulps: there rounding, not arithmetic, decides the result."""
    d.check_dtype(dtype)
    length = draw(st.integers(1, 16))
    param = d.dense_values(draw, (length,), d.representable_floats(dtype, d.Magnitudes(0, 2), zero=False))
    touched = sorted(draw(st.lists(st.integers(0, length - 1), min_size=1, max_size=length, unique=True)))
    grad_values = draw(d.fixed_lists(d.representable_floats(dtype, d.Magnitudes(-3, 2), zero=False), len(touched)))
    ulp_at_4 = 2.0 ** (2 - DTYPES[dtype].mantissa_bits)
    lr = ulp_at_4 * draw(st.sampled_from([0.05, 0.3, 0.5, 0.7, 1.0, 1.5, 2.5, 7.0, 20.0]))
    hyper = {"lr": lr, **op.rounding_hyperparameters(draw)}
    grad = CooArray(np.array([touched], dtype=np.int64), np.array(grad_values, dtype=np.float64), (length,))
    return OptimizerInputs(param, [grad], hyper)


NEGATIVE = st.sampled_from([-1.0, -0.5, -1e-3, -10.0])  # what an out-of-range hyperparameter is drawn from


def with_sparse_weight_decay(draw, inputs: OptimizerInputs, hyper: dict) -> OptimizerInputs:
    """``inputs`` with a weight_decay drawn into ``hyper`` and at least one sparse gradient: torch
    rejects the two together (RuntimeError) in Adagrad and SGD."""
    hyper["weight_decay"] = draw(st.sampled_from([0.1, 1.0, 1e-4]))
    grads = list(inputs.grads)
    if not any(isinstance(g, CooArray) for g in grads):
        grads[0] = empty_gradient(inputs.param.shape)
    return OptimizerInputs(inputs.param, grads, hyper)


LIFECYCLE_SHAPES = ((2, 3), (), (0,), (3,), (2, 2))  # 0-d and zero-size among them (torch's test_empty_grad)


@st.composite
def lifecycles(draw, op: OptimizerOp, dtype: str = "float64") -> "LifecycleInputs":
    """1-3 parameters (shapes from LIFECYCLE_SHAPES; sparse-only optimizers: 1-D and 2-D ones), each but the
    first possibly added mid-run, missing its gradient on some steps, of a second float dtype (float32 beside
    float64 items, float64 beside float32, float32 beside half ones: torch's test_mixed_device_dtype), maybe a
    frozen one last, 2-4 steps, lr scaled between steps, lr as a 0-d tensor (maybe changed in place with fill_),
    a state_dict round trip. Every event shrinks toward absent."""
    d.check_dtype(dtype)
    other = "float64" if dtype == "float32" else "float32"
    steps = draw(st.integers(2, 4))
    hyper = draw(_hyperparameters(op))
    sparse = not op.takes_dense_gradients
    shapes = [s for s in LIFECYCLE_SHAPES if not sparse or len(s) >= 1]
    members = []
    for index in range(draw(st.integers(1, 3))):
        own = other if index and draw(st.booleans()) else None
        values = d.representable_floats(own or dtype, d.PARAM_MAGNITUDES[own or dtype])
        grad_values = d.representable_floats(own or dtype, d.GRADIENT_MAGNITUDES[own or dtype])
        shape = draw(st.sampled_from(shapes))
        start = 0 if index == 0 else draw(st.integers(0, steps - 1))
        grads: list = []
        for step in range(steps):
            if step < start or draw(st.booleans()) and index:  # the first parameter steps every time
                grads.append(None)
            elif sparse:
                grads.append(draw(d.coo_arrays(own or dtype, size=shape, sparse_dim=1, zero_sized=True, max_entries=4)))
            else:
                grads.append(d.dense_values(draw, shape, grad_values))
        members.append(Member(d.dense_values(draw, shape, values), grads, start, dtype=own))
    if draw(st.booleans()):
        shape = draw(st.sampled_from(shapes))
        values = d.representable_floats(dtype, d.PARAM_MAGNITUDES[dtype])
        members.append(Member(d.dense_values(draw, shape, values), [None] * steps, frozen=True))
    scales = [1.0] + [draw(st.sampled_from([1.0, 0.5, 0.25, 2.0])) for _ in range(steps - 1)]
    tensor_lr = draw(st.booleans())
    resume_after = draw(st.one_of(st.none(), st.integers(1, steps - 1)))
    lr_in_place = tensor_lr and draw(st.booleans())
    return LifecycleInputs(members, hyper, scales, tensor_lr, resume_after, lr_in_place)


@st.composite
def complex_trajectories(draw, op: OptimizerOp, dtype: str = "float64") -> OptimizerInputs:
    """A trajectory whose parameter and gradients end in a dim of 2 (real, imaginary): what the property
    complex-agrees runs as complex numbers and as their view_as_real. Sparse gradients keep that last dim
    dense (hybrid), so each specified entry is a whole complex number."""
    d.check_dtype(dtype)
    shape = draw(d.shapes(1, 2, 1, 3, max_numel=6))
    size = (*shape, 2)
    hyper = draw(_hyperparameters(op))
    param = d.dense_values(draw, size, d.representable_floats(dtype, d.PARAM_MAGNITUDES[dtype]))
    grads = []
    for _ in range(draw(st.integers(1, 3))):
        if op.accepts_dense_steps(hyper) and op.takes_dense_gradients and draw(st.booleans()):
            grads.append(d.dense_values(draw, size, d.representable_floats(dtype, d.GRADIENT_MAGNITUDES[dtype])))
        else:
            grads.append(draw(d.coo_arrays(dtype, size=size, sparse_dim=draw(st.integers(1, len(shape))),
                                           max_entries=4)))
    return OptimizerInputs(param, grads, hyper)


def _patterned(draw, shape: tuple[int, ...], values: st.SearchStrategy[float]) -> np.ndarray:
    """An array of ``shape`` from 1-3 drawn values repeated with a drawn period (a structured generator:
    hundreds of entries from a handful of draws)."""
    chosen = draw(st.lists(values, min_size=1, max_size=3))
    period = draw(st.integers(1, 5))
    count = int(np.prod(shape)) if shape else 1
    flat = np.array([chosen[(i // period) % len(chosen)] for i in range(count)], dtype=np.float64)
    return flat.reshape(shape)


@st.composite
def sized_inputs(draw, op: OptimizerOp, dtype: str = "float64") -> OptimizerInputs:
    """A parameter whose entries (or whose hybrid rows) sit at a kernel-size boundary (SIZE_BOUNDARIES; rows
    of 257 or 300 for a hybrid sparse gradient), 1-2 steps of patterned gradients: dense ones, or sparse ones
    specifying every k-th row."""
    d.check_dtype(dtype)
    hyper = draw(_hyperparameters(op))
    dense = op.takes_dense_gradients and op.accepts_dense_steps(hyper) and draw(st.booleans())
    if dense or draw(st.booleans()):
        shape: tuple[int, ...] = (draw(st.sampled_from(SIZE_BOUNDARIES)),)
    else:
        shape = (draw(st.integers(1, 3)), draw(st.sampled_from((257, 300))))  # hybrid: rows wider than 256
    param = _patterned(draw, shape, d.representable_floats(dtype, d.PARAM_MAGNITUDES[dtype]))
    grad_values = d.representable_floats(dtype, d.GRADIENT_MAGNITUDES[dtype], zero=False)
    grads: list = []
    for _ in range(draw(st.integers(1, 2))):
        if dense:
            grads.append(_patterned(draw, shape, grad_values))
        else:
            every = draw(st.integers(1, 3))
            rows = np.arange(0, shape[0], every, dtype=np.int64)
            values = _patterned(draw, (len(rows), *shape[1:]), grad_values)
            grads.append(CooArray(rows.reshape(1, -1), values, shape))
    return OptimizerInputs(param, grads, hyper)
