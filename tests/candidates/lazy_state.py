import torch
from torch.optim import Optimizer


class LazyAdagrad(Optimizer):
    """torch's Adagrad arithmetic, state created at the first step (as torch's Adam does)."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad if not group["maximize"] else -p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.tensor(0.0)
                    state["sum"] = torch.full_like(p, group["initial_accumulator_value"],
                                                   memory_format=torch.preserve_format)
                state["step"] += 1
                step = state["step"].item()
                clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
                if grad.is_sparse:
                    if group["weight_decay"] != 0:
                        raise RuntimeError("weight_decay option is not compatible with sparse gradients")
                    grad = grad.coalesce()
                    idx, vals = grad._indices(), grad._values()
                    def make(v):
                        return torch.sparse_coo_tensor(idx, v, grad.size())
                    state["sum"].add_(make(vals.pow(2)))
                    std = state["sum"].sparse_mask(grad)
                    std_values = std._values().sqrt_().add_(group["eps"])
                    p.add_(make(vals / std_values), alpha=-clr)
                else:
                    if group["weight_decay"] != 0:
                        grad = grad.add(p, alpha=group["weight_decay"])
                    state["sum"].addcmul_(grad, grad, value=1)
                    std = state["sum"].sqrt().add_(group["eps"])
                    p.addcdiv_(grad, std, value=-clr)
        return loss
