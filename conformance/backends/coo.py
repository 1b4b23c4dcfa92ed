"""``coo``: torch sparse COO tensors and stock ``torch.optim``, as the documents write it."""

from __future__ import annotations

import torch

from conformance.core.divergences import STOCK_TORCH, LayoutDivergence, register
from conformance.core.layouts import contiguous_strides
from conformance.core.tensors import CooArray
from conformance.core.types import RunContext
from conformance.backends.base import Backend, torch_kernels_missing_are_unsupported
from conformance.ops import OPS
from conformance.ops.base import FOREACH
from conformance.ops.masked_mean import MaskedMeanInputs, differentiate


def stock_torch(op):
    """The runner of an op whose stock implementation this backend is (``Op.stock_backend``): the
    op record runs torch's own implementation (``torch.Tensor.coalesce``, ``torch.optim.Adagrad``...)."""
    return lambda inputs, ctx: op.run_candidate(op.torch_implementation, inputs, ctx)


def sparse_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sparsity as a stand-in for the mask: a COO tensor of the valid entries, summed."""
    if values.dim() == 0:  # a 0-d COO tensor cannot hold "no entries"; the flat view has the same mean
        values, mask = values.reshape(1), mask.reshape(1)
    indices = mask.nonzero().T
    valid = torch.sparse_coo_tensor(indices, values[tuple(indices)], values.shape)
    return torch.sparse.sum(valid) / valid._nnz()


def masked_mean_coo(inputs: MaskedMeanInputs, ctx: RunContext):
    return differentiate(sparse_masked_mean, inputs, ctx)


class CooBackend(Backend):
    name = "coo"
    description = "torch sparse COO tensors and stock torch.optim"

    def optimizer_class(self, op: str):
        record = OPS.get(op)
        return record.torch_implementation if record is not None and record.is_optimizer else None

    def run(self, op, inputs, ctx: RunContext):
        with torch_kernels_missing_are_unsupported(ctx.device, "sparse COO"):
            return super().run(op, inputs, ctx)

    def drive_optimizer(self, op: str, ctx: RunContext, use):
        with torch_kernels_missing_are_unsupported(ctx.device, "sparse COO"):
            return super().drive_optimizer(op, ctx, use)


BACKEND = CooBackend({
    **{name: stock_torch(op) for name, op in OPS.items() if op.stock_backend == CooBackend.name},
    "masked_mean": masked_mean_coo,  # stock torch's is masked: sparsity stands in for the mask here
})


# ---------------------------------------------------------------- what layout-invariant found in torch

def _has_a_one_entry_step(inputs) -> bool:
    """A step's sparse gradient has one distinct index (what torch adds into the parameter has nnz 1)."""
    return any(isinstance(g, CooArray) and g.indices.shape[1] and
               len({tuple(column) for column in g.indices.T.tolist()}) == 1 for g in getattr(inputs, "grads", None) or [])


def _one_entry_add_misplaced(inputs, placements) -> bool:
    """A one-entry step (:func:`_has_a_one_entry_step`), and the parameter has a storage offset or the
    gradient's values are laid out otherwise than row-major."""
    if not _has_a_one_entry_step(inputs):
        return False
    for placement in placements:
        view = placement.view
        if placement.role == "param" and view.storage_offset():
            return True
        if placement.role == "grad.values" and view.dim() > 1 and view.stride() != contiguous_strides(tuple(view.shape)):
            return True
    return False


ONE_ENTRY_SPARSE_ADD = register(LayoutDivergence(
    "torch-dense-add-one-entry-sparse-misplaced",
    "torch's dense.add_(sparse) on cpu with a sparse tensor of one entry (nnz 1: a sparse gradient with one "
    "distinct index, as Adagrad, SparseAdam and SGD add it into the parameter) writes at the wrong place when the "
    "dense tensor has a storage offset: it adds the offset twice (torch.zeros(30)[3:7].add_(sparse at index 1) "
    "writes storage position 7, not 4), so the parameter keeps its value, a neighbour in the same storage changes, "
    "and past the end of the storage the write corrupts the heap ('double free or corruption'); and it reads "
    "hybrid values whose leading stride is not the row length ((1, 2) values with strides (1, 1), which "
    "is_contiguous() calls contiguous) at the wrong place. Shown by torch 2.13.0 on cpu; docs/findings.md has the "
    "torch-only reproducer",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/aten/src/ATen/native/sparse/SparseTensorMath.cpp",
    ops=("adagrad", "sparse_adam", "sgd"), backends=(CooBackend.name, FOREACH), devices=("cpu",),
    properties=("layout-invariant",), behaviour=STOCK_TORCH, triggered=_one_entry_add_misplaced,
))


def _one_entry_into_a_view(inputs, placements) -> bool:
    """A one-entry step (:func:`_has_a_one_entry_step`) and the parameter is not laid out contiguously."""
    return _has_a_one_entry_step(inputs) and any(placement.role == "param" and (placement.view.storage_offset() or placement.view.stride()
                             != contiguous_strides(tuple(placement.view.shape))) for placement in placements)


ONE_ENTRY_SPARSE_ADD_CUDA = register(LayoutDivergence(
    "torch-dense-add-one-entry-sparse-misplaced-cuda",
    "torch's dense.add_(sparse) on cuda with a sparse tensor of one entry writes at the storage position of the "
    "entry's contiguous offset, not through the dense tensor's strides: Adagrad(lr=1) on a transposed float64 "
    "parameter of shape (1, 2, 3) with a one-entry sparse gradient at (0, 0, 1) left that entry and changed "
    "(0, 1, 0) to -9999999999. Seen on an NVIDIA H200 with torch 2.11.0+cu130 on 2026-11-28 "
    "(adagrad-layout-invariant[coo-cuda-float64], one shrunk example; whether more than one entry is misplaced "
    "too was not tried: the session's GPU time ran out)",
    "https://github.com/pytorch/pytorch/blob/v2.11.0/aten/src/ATen/native/sparse/cuda/SparseCUDATensorMath.cu",
    ops=("adagrad", "sparse_adam", "sgd"), backends=(CooBackend.name, FOREACH), devices=("cuda",),
    properties=("layout-invariant",), behaviour=STOCK_TORCH, triggered=_one_entry_into_a_view,
))


def _half_duplicates_on_a_view(inputs, placements) -> bool:
    """A step's sparse gradient repeats an index, and the parameter or the gradient's parts are not contiguous."""
    grads = getattr(inputs, "grads", None) or []
    repeats = any(isinstance(g, CooArray) and len({tuple(c) for c in g.indices.T.tolist()}) < g.indices.shape[1]
                  for g in grads)
    return repeats and any(placement.role in ("param", "grad.values", "grad.indices") for placement in placements)


HALF_DUPLICATES_BY_LAYOUT = register(LayoutDivergence(
    "torch-dense-add-half-duplicates-by-layout",
    "torch's dense.add_(sparse) on cpu in float16/bfloat16 adds an uncoalesced sparse tensor's duplicates into a "
    "contiguous dense tensor one at a time, rounding to the half dtype after each (pytorch#84471's half-precision "
    "accumulation), but into a non-contiguous one (a strided or transposed parameter) as their correctly rounded "
    "sum: SGD's sparse step (param.add_(grad, alpha=-lr), no coalesce) gives ones(2)[0] + (-1.0009765625) + "
    "1.0009765625 = 0.9990234375 on a contiguous float16 parameter and 1.0 on ones(4)[::2]. The result depends on "
    "the parameter's layout",
    "https://github.com/pytorch/pytorch/issues/84471",
    ops=("sgd",), backends=(CooBackend.name, FOREACH), devices=("cpu",), dtypes=("float16", "bfloat16"),
    properties=("layout-invariant",), behaviour=STOCK_TORCH, triggered=_half_duplicates_on_a_view,
))
