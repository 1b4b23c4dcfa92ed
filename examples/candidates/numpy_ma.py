"""numpy.ma as a ``masked_mean`` candidate: ``np.ma.masked_array(values, mask=~mask).mean()``.

    --conformance-impl masked_mean=examples.candidates.numpy_ma:masked_mean

numpy.ma's mask is True where an entry is *invalid*, the opposite of the contract's. A mean over no
valid entry is ``np.ma.masked``, which the adapter reads as NaN (``np.ma.filled(..., nan)``).
NumPy has no autograd, so the gradient is that of the mean numpy.ma computed: ``1 / count()`` at
each valid entry (``~np.ma.getmaskarray``), zero elsewhere and zero everywhere when none is
valid. NumPy has no bfloat16: those inputs raise Unsupported.
"""

from __future__ import annotations

import numpy as np
import torch

from conformance import Unsupported
from examples.candidates._convert import from_numpy, to_numpy


class _MaskedArrayMean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        data = to_numpy(values)
        array = np.ma.masked_array(data, mask=~to_numpy(mask))
        ctx.valid = ~np.ma.getmaskarray(array)
        ctx.count = int(array.count())
        value = np.asarray(np.ma.filled(array.mean(), np.nan), dtype=data.dtype)
        return from_numpy(value, values.dtype, values.device)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        weights = ctx.valid / ctx.count if ctx.count else np.zeros(ctx.valid.shape)
        grad = grad_output * torch.from_numpy(np.asarray(weights, dtype=np.float64)).to(grad_output.dtype).to(grad_output.device)
        return grad, None


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    if values.dtype == torch.bfloat16:
        raise Unsupported(f"NumPy {np.__version__} has no bfloat16 dtype")
    return _MaskedArrayMean.apply(values, mask)
