"""Deliberately wrong implementations, each with one slip a user could make; the tests and the
gate must flag every one of them. Also a correct wrapper of torch's own classes as a control."""

from __future__ import annotations


import torch


def multiply_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The multiply-by-mask idiom: NaN * 0 = NaN lets a masked NaN through."""
    return (values * mask).sum() / mask.sum()


def dropping_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    """Coalesce that drops entries whose sum is zero."""
    result = tensor.coalesce()
    nonzero = result._values() != 0
    keep = nonzero if nonzero.dim() == 1 else nonzero.flatten(1).any(dim=1)  # hybrid: any nonzero in the row
    return torch.sparse_coo_tensor(result._indices()[:, keep], result._values()[keep], result.shape).coalesce()


def raising_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("this candidate always raises")



# ---------------------------------------------------------------- clean re-implementations
# Each mutant below is one of these with a single slip, so that the slip is the only difference.

WEIGHT_DECAY_ERROR = "weight_decay option is not compatible with sparse gradients"
DENSE_GRADIENT_ERROR = "SparseAdam does not support dense gradients, please consider Adam instead"


class CleanAdagrad(torch.optim.Adagrad):
    """A correct re-implementation of torch's Adagrad (sparse and dense gradients): a control."""

    # written for real parameters (|g|^2 as g * g, no view_as_real), and says so: as a subclass of torch's Adagrad
    # it would otherwise start from torch's capability and be judged on complex ones (complex-agrees)
    supports_complex = False

    def clr(self, group, step):
        return group["lr"] / (1 + (step - 1) * group["lr_decay"])

    def signed(self, group, grad):
        return -grad if group["maximize"] else grad

    def std(self, state_sum, eps):
        return state_sum.sqrt().add(eps)

    def accumulate(self, state_sum, grad):
        """state_sum += g**2 at the gradient's (coalesced) entries; returns the coalesced gradient."""
        grad = grad.coalesce()
        state_sum.add_(torch.sparse_coo_tensor(grad._indices(), grad._values().pow(2), grad.shape))
        return grad

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "sum" not in state:
                    state["step"] = torch.tensor(0.0)
                    state["sum"] = torch.full_like(p, group["initial_accumulator_value"])
                state["step"] += 1
                step = state["step"].item()
                grad = self.signed(group, p.grad)
                if group["weight_decay"] != 0:
                    if grad.is_sparse:
                        raise RuntimeError(WEIGHT_DECAY_ERROR)
                    grad = grad.add(p, alpha=group["weight_decay"])
                clr = self.clr(group, step)
                if grad.is_sparse:
                    grad = self.accumulate(state["sum"], grad)
                    std = self.std(state["sum"].sparse_mask(grad)._values(), group["eps"])
                    p.add_(torch.sparse_coo_tensor(grad._indices(), grad._values() / std, grad.shape), alpha=-clr)
                else:
                    self.accumulate_dense(state["sum"], grad)
                    p.addcdiv_(grad, self.std(state["sum"], group["eps"]), value=-clr)
        return None

    def accumulate_dense(self, state_sum, grad):
        """state_sum += g**2 at every entry (a dense gradient)."""
        state_sum.addcmul_(grad, grad, value=1)


class EpsInsideSqrtAdagrad(CleanAdagrad):
    """std = sqrt(state_sum + eps) instead of sqrt(state_sum) + eps."""

    def std(self, state_sum, eps):
        return state_sum.add(eps).sqrt()


class NoMaximizeAdagrad(CleanAdagrad):
    """Forgets maximize."""

    def signed(self, group, grad):
        return grad


class LrDecayOffByOneAdagrad(CleanAdagrad):
    """clr = lr / (1 + step * lr_decay): the first step is already decayed."""

    def clr(self, group, step):
        return group["lr"] / (1 + step * group["lr_decay"])


class SquareThenSumAdagrad(CleanAdagrad):
    """Squares each written entry, then sums the squares of duplicates (sum of g_i**2, not (sum g_i)**2)."""

    def accumulate(self, state_sum, grad):
        squares = torch.sparse_coo_tensor(grad._indices(), grad._values().pow(2), grad.shape).coalesce()
        state_sum.add_(squares)
        return grad.coalesce()


class RowwiseAdagrad(CleanAdagrad):
    """One accumulator per row, as FBGEMM's EXACT_ROWWISE_ADAGRAD keeps for embedding tables: each
    touched row adds the mean of its g**2, and every entry of the row divides by that row's root
    (the row's value is kept in each of its entries, so the state has torch's shape)."""

    def add_row_means(self, state_sum, squares, rows):
        if state_sum.dim() < 2:
            state_sum[rows] += squares[rows]
            return
        if len(rows) == 0 or state_sum.numel() == 0:
            return
        means = squares[rows].reshape(len(rows), -1).mean(dim=1)
        state_sum[rows] += means.reshape(-1, *([1] * (state_sum.dim() - 1)))

    def accumulate(self, state_sum, grad):
        if grad.sparse_dim() == 0:
            return super().accumulate(state_sum, grad)
        grad = grad.coalesce()
        squares = torch.sparse_coo_tensor(grad._indices(), grad._values().pow(2), grad.shape).to_dense()
        self.add_row_means(state_sum, squares, grad._indices()[0].unique() if grad._nnz() else
                           torch.zeros(0, dtype=torch.long))
        return grad

    def accumulate_dense(self, state_sum, grad):
        if state_sum.dim() == 0:
            state_sum.addcmul_(grad, grad, value=1)
            return
        self.add_row_means(state_sum, grad * grad, torch.arange(state_sum.shape[0]))


class CleanSparseAdam(torch.optim.SparseAdam):
    """A correct re-implementation of torch's SparseAdam: a control."""

    def signed(self, group, grad):
        return -grad if group["maximize"] else grad

    def bias_step(self, state, index, sparse_shape):
        return state["step"].item()

    def moments(self, exp_avg, exp_avg_sq, index, g, beta1, beta2):
        exp_avg[index] = exp_avg[index] + (g - exp_avg[index]) * (1 - beta1)
        exp_avg_sq[index] = exp_avg_sq[index] + (g * g - exp_avg_sq[index]) * (1 - beta2)

    def update(self, p, exp_avg, exp_avg_sq, index, group, step):
        beta1, beta2 = group["betas"]
        step_size = group["lr"] * (1 - beta2**step) ** 0.5 / (1 - beta1**step)
        if isinstance(step_size, torch.Tensor):  # one step count per row: broadcast over dense dims
            step_size = step_size.to(p.dtype).reshape(-1, *([1] * (p.dim() - len(index))))
        p[index] = p[index] - step_size * exp_avg[index] / (exp_avg_sq[index].sqrt() + group["eps"])

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise RuntimeError(DENSE_GRADIENT_ERROR)
                state = self.state[p]
                if "exp_avg" not in state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                grad = self.signed(group, p.grad).coalesce()
                if grad._nnz() == 0 and not self.touches_all:
                    if not self.counts_empty_steps:
                        state["step"] -= 1
                    continue
                index = tuple(grad._indices())
                self.moments(state["exp_avg"], state["exp_avg_sq"], index, grad._values(), beta1, beta2)
                step = self.bias_step(state, index, p.shape[: grad.sparse_dim()])
                self.update(p, state["exp_avg"], state["exp_avg_sq"], index, group, step)
        return None

    touches_all = False  # update every entry, as dense Adam would (a slip)
    counts_empty_steps = True  # an empty gradient still counts a step (torch does)


class PerRowStepSparseAdam(CleanSparseAdam):
    """SparseAdam whose bias correction counts steps only when a gradient is non-empty."""

    counts_empty_steps = False


class PerRowBiasCorrectionSparseAdam(CleanSparseAdam):
    """Bias correction with a step count per row (how often the row was hit), not per step()."""

    def bias_step(self, state, index, sparse_shape):
        if "row_steps" not in state:
            state["row_steps"] = torch.zeros(sparse_shape, dtype=torch.float64)
        state["row_steps"][index] += 1
        return state["row_steps"][index]


class NoMaximizeSparseAdam(CleanSparseAdam):
    """Forgets maximize."""

    def signed(self, group, grad):
        return grad


class AdamEpsSparseAdam(CleanSparseAdam):
    """Adam's eps placement: eps added to the bias-corrected root, not to sqrt(exp_avg_sq)."""

    def update(self, p, exp_avg, exp_avg_sq, index, group, step):
        beta1, beta2 = group["betas"]
        corrected = exp_avg_sq[index].sqrt() / (1 - beta2**step) ** 0.5
        p[index] = p[index] - group["lr"] / (1 - beta1**step) * exp_avg[index] / (corrected + group["eps"])


class DenseMomentsSparseAdam(CleanSparseAdam):
    """Dense Adam on the densified gradient: unspecified entries' moments decay and they move."""

    touches_all = True

    def moments(self, exp_avg, exp_avg_sq, index, g, beta1, beta2):
        dense = torch.zeros_like(exp_avg)
        dense[index] = g
        exp_avg.mul_(beta1).add_(dense, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(dense, dense, value=1 - beta2)

    def update(self, p, exp_avg, exp_avg_sq, index, group, step):
        beta1, beta2 = group["betas"]
        step_size = group["lr"] * (1 - beta2**step) ** 0.5 / (1 - beta1**step)
        p.sub_(step_size * exp_avg / (exp_avg_sq.sqrt() + group["eps"]))


# ---------------------------------------------------------------- masked mean


def where_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A correct masked mean: a control."""
    return torch.where(mask, values, torch.zeros((), dtype=values.dtype)).sum() / mask.sum()


def torch_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """torch.masked.mean (torch's own), adapted to the (values, mask) contract."""
    return torch.masked.mean(values, mask=mask)


def nansum_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """nansum hides masked NaN*0 -- and also a NaN at a valid entry, which must propagate."""
    return (values * mask).nansum() / mask.sum()


def numel_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Divides by the number of entries instead of the number of valid ones."""
    return torch.where(mask, values, torch.zeros((), dtype=values.dtype)).mean()


class _LeakyMaskedMean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values, mask):
        count = mask.sum()
        ctx.save_for_backward(mask, count)
        return torch.where(mask, values, torch.zeros((), dtype=values.dtype)).sum() / count

    @staticmethod
    def backward(ctx, grad_output):
        mask, count = ctx.saved_tensors
        return grad_output / count * torch.ones(mask.shape, dtype=grad_output.dtype), None  # forgot "* mask"


def leaky_grad_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A hand-written backward that forgets to multiply by the mask: gradient outside the mask."""
    return _LeakyMaskedMean.apply(values, mask)


# ---------------------------------------------------------------- coalesce


def torch_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    """torch's own coalesce: a control."""
    return tensor.coalesce()


def column_major_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    """Sums duplicates but orders entries by the last sparse dim first (and still says coalesced)."""
    result = tensor.coalesce()
    indices, values = result._indices(), result._values()
    if indices.shape[1] > 1:
        order = sorted(range(indices.shape[1]), key=lambda i: tuple(reversed(indices[:, i].tolist())))
        order = torch.tensor(order)
        indices, values = indices[:, order], values[order]
    return torch.sparse_coo_tensor(indices, values, tensor.shape, is_coalesced=True)


def last_write_wins_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    """Keeps the last value written at each index instead of the sum (index_put_ without accumulate)."""
    indices, values = tensor._indices(), tensor._values()
    last: dict[tuple, int] = {}
    for position in range(indices.shape[1]):
        last[tuple(indices[:, position].tolist())] = position
    keys = sorted(last)
    if not keys:
        return tensor.coalesce()
    chosen = torch.tensor([last[k] for k in keys])
    return torch.sparse_coo_tensor(indices[:, chosen], values[chosen], tensor.shape, is_coalesced=True)


SquareBeforeSumAdagrad = SquareThenSumAdagrad  # the name the spec tests use

TorchAdagrad = torch.optim.Adagrad
TorchSparseAdam = torch.optim.SparseAdam
