"""``coo``: torch sparse COO tensors and stock ``torch.optim``, as the documents write it."""

from __future__ import annotations

import torch

from conformance.core.types import RunContext
from conformance.backends.base import Backend, torch_kernels_missing_are_unsupported
from conformance.ops import OPS
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
