"""A right Adagrad that computes torch's update in float64 and rounds the parameter once per step: in
float16 it stays finite where torch's own step divides 0/0 (eps 1e-10 rounds to 0 beside a zero accumulator,
the divergence float16-eps-underflow). The lifecycle property must pass it."""

from __future__ import annotations

import torch


class DoubleAdagrad(torch.optim.Optimizer):
    """torch's Adagrad computed in float64: the accumulator kept in float64, the parameter rounded once per
    step. A parameter of a group added later gets its state at its first step, made as ``__init__`` makes it."""

    # written for real parameters, and says so (.to(torch.float64) would drop a complex one's imaginary part);
    # an optimizer that says nothing and is not a subclass of torch's Adagrad is not judged on complex ones either
    supports_complex = False

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                 eps=1e-10, maximize=False):
        checked = torch.optim.Adagrad(params, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps,
                                      maximize=maximize)  # torch's argument checks and messages
        super().__init__(checked.param_groups, dict(checked.defaults))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = self._fresh_state(p, group)

    @staticmethod
    def _fresh_state(p: torch.Tensor, group: dict) -> dict:
        return {"step": torch.tensor(0.0),
                "sum": torch.full(p.shape, group["initial_accumulator_value"], dtype=torch.float64, device=p.device)}

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._step_one(p, group)

    def _step_one(self, p: torch.Tensor, group: dict) -> None:
        state = self.state[p]
        if not state:  # a parameter of a group added later (add_param_group)
            state.update(self._fresh_state(p, group))
        state["step"] += 1
        clr = float(group["lr"]) / (1 + (state["step"].item() - 1) * group["lr_decay"])
        grad = p.grad.to(torch.float64)
        if group["maximize"]:
            grad = -grad
        if grad.is_sparse:
            if group["weight_decay"] != 0:
                raise RuntimeError("weight_decay option is not compatible with sparse gradients")
            grad = grad.coalesce()
            index, values = tuple(grad._indices()), grad._values()
            state["sum"][index] += values * values
            std = state["sum"][index].sqrt() + group["eps"]
            p[index] = (p[index].to(torch.float64) - clr * values / std).to(p.dtype)
            return
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p.to(torch.float64)
        state["sum"] += grad * grad
        std = state["sum"].sqrt() + group["eps"]
        p.copy_((p.to(torch.float64) - clr * grad / std).to(p.dtype))

    def load_state_dict(self, state_dict):
        """Keep the float64 accumulator (torch's load_state_dict casts state to the parameter's dtype)."""
        super().load_state_dict(state_dict)
        ids = [pid for group in state_dict["param_groups"] for pid in group["params"]]
        for pid, p in zip(ids, (p for group in self.param_groups for p in group["params"])):
            if pid in state_dict["state"]:
                self.state[p]["sum"] = state_dict["state"][pid]["sum"].to(device=p.device, dtype=torch.float64)
