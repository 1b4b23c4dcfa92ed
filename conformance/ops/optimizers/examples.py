"""The optimizers' explicit examples of each dimension of the input space, by name: what each property runs
first, before Hypothesis draws (its explicit examples). Each is ``(op, dtype) -> [inputs]``, declared as a code
field of :class:`~conformance.ops.optimizers.base.OptimizerOp` (``layout_examples=...``) and steered by the
record's data: its ``explicit_hyperparameters``, ``layout_hyperparameters``, ``lifecycle_hyperparameters``,
``long_trajectory_hyperparameters`` and ``long_trajectory_steps``, and whether it takes dense gradients
(``OptimizerOp.takes_dense_gradients``; ``op`` is typed Any here, as optimizers/base.py imports this module).
Values exact in every dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

from conformance.core.layouts import CHANNELS_LAST, STRIDED, TRANSPOSED, Layout
from conformance.core.tensors import CooArray
from conformance.ops.optimizers.inputs import LifecycleInputs, Member, OptimizerInputs



def explicit_examples(op: Any, dtype: str) -> list[OptimizerInputs]:
    """One two-step trajectory per :attr:`explicit_hyperparameters`: a 4-entry parameter, a
    first gradient with a duplicate index (1 + 0.5 at entry 2) and two entries left out, then
    a gradient at entries 3 and 0 -- duplicates summed before squaring, lazy (sparse) state
    and the steps' count all show. Values exact in every dtype."""
    param = np.array([1.0, -2.0, 0.5, 3.0])
    grads = [CooArray(np.array([[2, 0, 2]], dtype=np.int64), np.array([1.0, -0.5, 0.5]), (4,)),
             CooArray(np.array([[3, 0]], dtype=np.int64), np.array([2.0, 0.25]), (4,))]
    return [OptimizerInputs(param.copy(), [CooArray(g.indices.copy(), g.values.copy(), g.size) for g in grads],
                            dict(hyper)) for hyper in op.explicit_hyperparameters]


def sizes_examples(op: Any, dtype: str) -> list[OptimizerInputs]:
    """Two steps on parameters of 17 and 257 entries (a vector width and a block size, each plus one), every
    entry specified, values exact in every dtype: a kernel that skips its remainder, or stops at one block,
    leaves the last entries unmoved."""
    examples = []
    for length in (17, 257):
        param = np.resize(np.array([1.0, -2.0, 0.5]), length)
        dense = [np.resize(np.array([0.5, -1.0, 2.0, 0.25]), length), np.resize(np.array([-1.0, 0.5]), length)]
        grads: list[CooArray | np.ndarray] = list(dense)
        if not op.takes_dense_gradients:
            grads = [CooArray(np.arange(length, dtype=np.int64).reshape(1, -1), g, (length,)) for g in dense]
        examples.append(OptimizerInputs(param, grads, dict(op.lifecycle_hyperparameters)))
    return examples


def layout_examples(op: Any, dtype: str) -> list[tuple[OptimizerInputs, dict]]:
    """Two steps on a 2 x 3 parameter, dense gradients where the optimizer takes them (sparse ones
    at three entries otherwise), values exact in every dtype: the parameter as a strided view
    (offset 1, step 2), then the gradients transposed (their values strided for sparse ones); and one
    step on a 1 x 2 x 2 x 2 parameter in channels_last."""
    param = np.array([[1.0, -2.0, 0.5], [3.0, -1.0, 2.0]])
    dense = [np.array([[0.5, -1.0, 2.0], [1.0, 0.25, -0.5]]), np.array([[-1.0, 2.0, 0.5], [0.25, 1.0, -2.0]])]
    hyper = dict(op.layout_hyperparameters)
    if op.takes_dense_gradients:
        grads: list = dense
        moved = {"grad": Layout(TRANSPOSED)}
    else:
        indices = np.array([[0, 1, 1], [2, 0, 2]], dtype=np.int64)
        grads = [CooArray(indices, g[tuple(indices)], (2, 3)) for g in dense]
        moved = {"grad.values": Layout(STRIDED, 1, 2), "grad.indices": Layout(TRANSPOSED)}
    inputs = OptimizerInputs(param, grads, hyper)
    # a 1 x 2 x 2 x 2 parameter in channels_last (4-D, as a convolution's weight; drawn shapes have at most 3
    # dims), its gradient contiguous
    param4 = np.array([1.0, -2.0, 0.5, 3.0, -1.0, 2.0, 0.25, -0.5]).reshape(1, 2, 2, 2)
    dense4 = [np.array([0.5, -1.0, 2.0, 1.0, 0.25, -0.5, -1.0, 2.0]).reshape(1, 2, 2, 2)]
    grads4 = (dense4 if op.takes_dense_gradients else
              [CooArray(np.array([[0]], dtype=np.int64), g, (1, 2, 2, 2)) for g in dense4])
    channels_last = (OptimizerInputs(param4, grads4, hyper), {"param": Layout(CHANNELS_LAST)})
    return [(inputs, {"param": Layout(STRIDED, 1, 2)}), (inputs, moved), channels_last]


def grad_scaling_examples(op: Any, dtype: str) -> list[OptimizerInputs]:
    """Two dense steps on a 2 x 3 parameter, values exact in every dtype, with the record's
    :attr:`lifecycle_hyperparameters` (SGD's momentum: fused SGD's buffer made at a skipped first step)."""
    param = np.array([[1.0, -2.0, 0.5], [3.0, -1.0, 2.0]])
    grads = [np.array([[0.5, -1.0, 2.0], [1.0, 0.25, -0.5]]), np.array([[-1.0, 2.0, 0.5], [0.25, 1.0, -2.0]])]
    return [OptimizerInputs(param, grads, dict(op.lifecycle_hyperparameters))]


def complex_examples(op: Any, dtype: str) -> list[OptimizerInputs]:
    """Two steps on a 2-entry complex parameter (1 - 2j, 0.5 + 3j), gradients with both parts nonzero
    (|g|^2 and re^2, im^2 accumulate differently): dense where the optimizer takes them, sparse otherwise."""
    param = np.array([[1.0, -2.0], [0.5, 3.0]])
    dense = [np.array([[0.5, -1.0], [2.0, 0.25]]), np.array([[-1.0, 2.0], [0.5, 1.0]])]
    hyper = dict(op.lifecycle_hyperparameters)
    if op.takes_dense_gradients:
        return [OptimizerInputs(param, dense, hyper)]
    return [OptimizerInputs(param, [CooArray(np.array([[0, 1]], dtype=np.int64), g, (2, 2)) for g in dense], hyper)]


def lifecycle_examples(op: Any, dtype: str) -> list[LifecycleInputs]:
    """One life per event, so that the first that fails names its event: beside a 2 x 3 parameter stepping
    every time, a 0-d one missing its gradient at step 2 (a 1-D one for sparse-only optimizers); a 2-entry
    one added by add_param_group before step 2; a 2 x 2 one in another dtype (float64 beside the item's, float32
    beside float64) missing step 2; the lr halved, then halved again; lr a 0-d tensor; a zero-size parameter
    last in its group beside a frozen one; the state_dict round trip after step 1.
    Values exact in every dtype; the record's :attr:`lifecycle_hyperparameters` (lr_decay for Adagrad: a
    step counter shared between parameters shows)."""
    sparse = not op.takes_dense_gradients

    def grad(values):
        values = np.asarray(values, dtype=np.float64)
        if not sparse:
            return values
        return CooArray(np.array([list(range(values.shape[0]))], dtype=np.int64), values, values.shape)

    first = Member(np.array([[1.0, -2.0, 0.5], [3.0, -1.0, 2.0]]),
                   [grad([[0.5, -1.0, 2.0], [1.0, 0.25, -0.5]]), grad([[-1.0, 2.0, 0.5], [0.25, 1.0, -2.0]]),
                    grad([[1.0, 1.0, -1.0], [0.5, -0.5, 2.0]])])
    missing = (Member(np.array([1.5, -1.0]), [grad([0.5, 1.0]), None, grad([-1.0, 0.5])]) if sparse else
               Member(np.array(1.5), [np.array(0.5), None, np.array(-1.0)]))
    late = Member(np.array([2.0, -0.5]), [None, grad([1.0, -2.0]), grad([0.5, 0.5])], start=1)
    empty, frozen = Member(np.zeros((0,)), [grad(np.zeros((0,)))] * 3), Member(np.array([4.0, 4.0]), [None] * 3,
                                                                                frozen=True)
    hyper, still, scaled = dict(op.lifecycle_hyperparameters), [1.0, 1.0, 1.0], [1.0, 0.5, 0.25]
    other = Member(np.array([[0.5, -1.5], [2.0, 1.0]]), [grad([[1.0, -0.5], [0.25, 2.0]]), None,
                                                          grad([[-1.0, 0.5], [2.0, -0.25]])],
                   dtype="float64" if dtype != "float64" else "float32")
    return [LifecycleInputs([first, missing], hyper, still), LifecycleInputs([first, late], hyper, still),
            LifecycleInputs([first, other], hyper, still),
            LifecycleInputs([first], hyper, scaled), LifecycleInputs([first], hyper, still, tensor_lr=True),
            LifecycleInputs([first, frozen, empty], hyper, still),
            LifecycleInputs([first, missing], hyper, still, resume_after=1)]


def long_trajectory_examples(op: Any, dtype: str) -> list[OptimizerInputs]:
    """One trajectory of :attr:`long_trajectory_steps` steps per :attr:`long_trajectory_hyperparameters`:
    the same gradient (entries 0, 1 and 3 of 4; exact in every dtype) every step, so that an error made
    once per step adds up instead of cancelling."""
    grad = CooArray(np.array([[0, 1, 3]], dtype=np.int64), np.array([1.0, -0.5, 0.25]), (4,))
    return [OptimizerInputs(np.array([1.0, -2.0, 0.5, 3.0]), [grad] * op.long_trajectory_steps, dict(hyper))
            for hyper in op.long_trajectory_hyperparameters]
