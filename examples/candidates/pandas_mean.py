"""pandas as a ``masked_mean`` candidate: ``Series.where(mask).mean()`` -- the everyday pandas way to
average the valid entries (invalid ones become NaN, and ``mean`` skips NaN: ``skipna=True`` is the
default).

    --conformance-impl masked_mean=examples.candidates.pandas_mean:masked_mean

pandas has no autograd, so the gradient is that of the mean pandas computed: ``1 / n`` at each of
the ``n`` entries it averaged (``Series.where(mask).notna()``, read from pandas too), zero
elsewhere, and zero everywhere when it averaged none. pandas has no bfloat16: those inputs raise
Unsupported.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from conformance import Unsupported
from examples.candidates._convert import from_numpy, to_numpy


class _PandasMaskedMean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        series = pd.Series(to_numpy(values).reshape(-1))
        kept = series.where(to_numpy(mask).reshape(-1))
        averaged = kept.notna().to_numpy()  # the entries pandas' mean used
        ctx.averaged = averaged.reshape(tuple(values.shape))
        value = np.asarray(kept.mean(), dtype=series.dtype)  # pandas returns a NumPy scalar of float64 or the dtype
        return from_numpy(value, values.dtype, values.device)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        count = int(ctx.averaged.sum())
        weights = ctx.averaged / count if count else np.zeros(ctx.averaged.shape)
        grad = grad_output * torch.from_numpy(np.asarray(weights, dtype=np.float64)).to(grad_output.dtype).to(grad_output.device)
        return grad, None


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    if values.dtype == torch.bfloat16:
        raise Unsupported(f"pandas {pd.__version__} has no bfloat16 dtype")
    return _PandasMaskedMean.apply(values, mask)
