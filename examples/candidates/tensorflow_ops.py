"""TensorFlow as ``adagrad``, ``sparse_adam`` and ``masked_mean`` candidates.

    --conformance-impl adagrad=examples.candidates.tensorflow_ops:Adagrad
    --conformance-impl sparse_adam=examples.candidates.tensorflow_ops:SparseAdam
    --conformance-impl masked_mean=examples.candidates.tensorflow_ops:masked_mean

- ``Adagrad``: the raw apply ops ``ResourceSparseApplyAdagradV2`` (sparse gradient) and
  ``ResourceApplyAdagradV2`` (dense gradient); ``var -= lr * g / (sqrt(accum) + epsilon)``, eps
  after the root as in torch. TF's sparse apply takes 1-D row indices into the variable's first
  dimension, so the parameter is viewed as (prod(sparse sizes), *dense sizes) and the COO indices
  are linearized (``numpy.ravel_multi_index``); the gradient's entries go to TF as they come,
  duplicates and order kept.
- ``SparseAdam``: ``tf.compat.v1.train.AdamOptimizer.apply_gradients`` with a ``tf.IndexedSlices``
  gradient, the sparse path TF1 models used for embeddings.
- ``masked_mean``: ``tf.reduce_mean(tf.boolean_mask(values, mask))``, gradient by
  ``tf.GradientTape``.

The constructors are torch's (the optimizer classes subclass torch's). TF's ops have no
``lr_decay``, ``maximize`` or ``weight_decay``, and SparseAdam's dense-gradient error is torch's
policy: those raise Unsupported. All four dtypes of the suite are TF dtypes.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# TensorFlow and triton (which torch's optimizers import through torch._dynamo) both carry LLVM:
# loading triton after TensorFlow aborts the process ("Option 'bitcode-mdindex-threshold'
# registered more than once"), loading it first works. So triton, when installed, goes first.
try:
    import triton  # noqa: F401
except ImportError:
    pass

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

from conformance import Unsupported  # noqa: E402
from examples.candidates._convert import from_numpy, linear_rows, to_numpy  # noqa: E402

TF_DTYPES = {torch.float16: tf.float16, torch.bfloat16: tf.bfloat16, torch.float32: tf.float32,
             torch.float64: tf.float64}


def _tf_dtype(dtype: torch.dtype) -> tf.DType:
    if dtype not in TF_DTYPES:
        raise Unsupported(f"no TensorFlow dtype for {dtype}")
    return TF_DTYPES[dtype]


def _rows_view(tensor: torch.Tensor, sparse_dim: int) -> np.ndarray:
    """The dense tensor as (prod(first sparse_dim sizes), *rest): TF's row layout."""
    array = to_numpy(tensor)
    return array.reshape((int(np.prod(tensor.shape[:sparse_dim], dtype=np.int64)), *tensor.shape[sparse_dim:]))


def _sparse_rows(grad: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(row indices, values) of an uncoalesced COO gradient in TF's row layout, entries as given."""
    return linear_rows(to_numpy(grad._indices()), tuple(grad.shape[:grad.sparse_dim()])), to_numpy(grad._values())


class Adagrad(torch.optim.Adagrad):
    """torch.optim.Adagrad's constructor and state keys; TF's Adagrad apply ops do the update."""

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise Unsupported("this TensorFlow adapter takes no closure")
        for group in self.param_groups:
            if group["lr_decay"] != 0:
                raise Unsupported("TensorFlow's Adagrad apply ops have no lr_decay")
            if group["maximize"]:
                raise Unsupported("TensorFlow's Adagrad apply ops have no maximize")
            if group["weight_decay"] != 0:
                raise Unsupported("TensorFlow's Adagrad apply ops have no weight_decay")
            for p in group["params"]:
                if p.grad is None:
                    continue
                dtype = _tf_dtype(p.dtype)
                state = self.state[p]
                if "sum" not in state:  # a parameter of add_param_group: torch (>= 2.12) makes its state at its first step
                    state["step"] = torch.tensor(0.0)
                    state["sum"] = torch.full_like(p, group["initial_accumulator_value"],
                                                   memory_format=torch.preserve_format)
                grad = p.grad
                sparse_dim = grad.sparse_dim() if grad.is_sparse else p.dim()
                var = tf.Variable(_rows_view(p, sparse_dim), dtype=dtype)
                accum = tf.Variable(_rows_view(state["sum"], sparse_dim), dtype=dtype)
                lr = tf.constant(float(group["lr"]), dtype=dtype)
                eps = tf.constant(group["eps"], dtype=dtype)
                if grad.is_sparse:
                    rows, values = _sparse_rows(grad)
                    tf.raw_ops.ResourceSparseApplyAdagradV2(
                        var=var.handle, accum=accum.handle, lr=lr, epsilon=eps,
                        grad=tf.constant(values, dtype=dtype), indices=tf.constant(rows, dtype=tf.int64))
                else:
                    tf.raw_ops.ResourceApplyAdagradV2(var=var.handle, accum=accum.handle, lr=lr, epsilon=eps,
                                                      grad=tf.constant(_rows_view(grad, sparse_dim), dtype=dtype))
                p.copy_(from_numpy(var.numpy(), p.dtype, p.device).reshape(p.shape))
                state["sum"].copy_(from_numpy(accum.numpy(), p.dtype, p.device).reshape(p.shape))
                state["step"] += 1
        return None


class SparseAdam(torch.optim.SparseAdam):
    """torch.optim.SparseAdam's constructor and state keys; TF1's AdamOptimizer applies
    ``tf.IndexedSlices`` gradients.

    The torch state is the only state: every step builds the TF variable and a fresh AdamOptimizer,
    loads its slots ``m`` and ``v`` from ``exp_avg`` and ``exp_avg_sq`` and its float32 beta-power
    accumulators from the state's ``beta1_power`` and ``beta2_power`` (Python floats holding TF's
    float32 values, which ``load_state_dict`` keeps as they are), lets ``apply_gradients`` do the
    update and writes everything back. So ``state_dict()``/``load_state_dict()`` resume a trajectory,
    each parameter of a param group has its own hyperparameters, and a parameter may get gradients
    with different sparse_dim (hence different TF row layouts) from step to step."""

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise Unsupported("this TensorFlow adapter takes no closure")
        for group in self.param_groups:
            if group.get("maximize", False):
                raise Unsupported("tf.compat.v1.train.AdamOptimizer has no maximize")
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise Unsupported("tf.compat.v1.train.AdamOptimizer applies dense gradients as dense Adam: "
                                      "rejecting them is SparseAdam's policy, which TF has no counterpart of")
                dtype = _tf_dtype(p.dtype)
                sparse_dim = p.grad.sparse_dim()
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    # TF's initial accumulators: float32 variables holding beta1 and beta2
                    state["beta1_power"] = float(np.float32(beta1))
                    state["beta2_power"] = float(np.float32(beta2))
                var = tf.Variable(_rows_view(p, sparse_dim), dtype=dtype)
                optimizer = tf.compat.v1.train.AdamOptimizer(learning_rate=float(group["lr"]), beta1=beta1, beta2=beta2,
                                                             epsilon=group["eps"])
                optimizer._create_slots([var])  # what apply_gradients does first; it reuses what exists
                m, v = optimizer.get_slot(var, "m"), optimizer.get_slot(var, "v")
                m.assign(tf.constant(_rows_view(state["exp_avg"], sparse_dim), dtype=dtype))
                v.assign(tf.constant(_rows_view(state["exp_avg_sq"], sparse_dim), dtype=dtype))
                beta1_power, beta2_power = optimizer._get_beta_accumulators()
                beta1_power.assign(state["beta1_power"])
                beta2_power.assign(state["beta2_power"])
                rows, values = _sparse_rows(p.grad)
                gradient = tf.IndexedSlices(tf.constant(values, dtype=dtype), tf.constant(rows, dtype=tf.int64),
                                            dense_shape=tf.constant(var.shape, dtype=tf.int64))
                optimizer.apply_gradients([(gradient, var)])
                state["step"] += 1
                state["beta1_power"] = float(beta1_power.numpy())
                state["beta2_power"] = float(beta2_power.numpy())
                p.copy_(from_numpy(var.numpy(), p.dtype, p.device).reshape(p.shape))
                state["exp_avg"].copy_(from_numpy(m.numpy(), p.dtype, p.device).reshape(p.shape))
                state["exp_avg_sq"].copy_(from_numpy(v.numpy(), p.dtype, p.device).reshape(p.shape))
        return None


class _TfMaskedMean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        dtype = _tf_dtype(values.dtype)
        x = tf.constant(to_numpy(values), dtype=dtype)
        with tf.GradientTape() as tape:
            tape.watch(x)
            # tf.boolean_mask rejects a 0-d mask ("mask cannot be scalar"), so both go in flattened
            flat = tf.reshape(x, [-1])
            y = tf.reduce_mean(tf.boolean_mask(flat, tf.constant(to_numpy(mask).reshape(-1))))
        ctx.tf = (tape, x, y, dtype)
        return from_numpy(y.numpy(), values.dtype, values.device)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        tape, x, y, dtype = ctx.tf
        grad = tape.gradient(y, x, output_gradients=tf.constant(to_numpy(grad_output), dtype=dtype))
        if isinstance(grad, tf.IndexedSlices):
            grad = tf.convert_to_tensor(grad)
        return from_numpy(grad.numpy(), grad_output.dtype, grad_output.device), None


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return _TfMaskedMean.apply(values, mask)
