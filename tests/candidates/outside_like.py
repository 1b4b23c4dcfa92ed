"""Candidates modelled on real outside implementations that a suite must judge *right*, or whose
restrictions it must work around rather than report as failures (issue 23): an Adagrad keeping its
accumulator in float64, a coalesce that is slow on every new shape (JAX compiles per shape), one
that is nondeterministic, and an Adagrad library that supports only some of torch's options."""

from __future__ import annotations

import os
import time

import torch

from conformance import Unsupported


class Float64StateAdagrad(torch.optim.Optimizer):
    """Adagrad with its accumulator in float64: torch's initial value in the parameter's dtype,
    widened (``initial_accumulator_value=0.1`` on a float32 parameter starts at
    0.10000000149011612), every step computed in float64 and the parameter rounded once. Right:
    its state never changes where a gradient specifies nothing, so it must pass everything."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                 eps=1e-10, maximize=False):
        self._torch = torch.optim.Adagrad(params, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                          initial_accumulator_value=initial_accumulator_value, eps=eps,
                                          maximize=maximize)  # torch's argument checks and messages
        super().__init__(self._torch.param_groups, dict(self._torch.defaults))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {"step": torch.tensor(0.0),
                                 "sum": torch.full(p.shape, initial_accumulator_value, dtype=p.dtype,
                                                   device=p.device).to(torch.float64)}

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:  # a parameter of a group added later (add_param_group): its state made here, as torch does
                    state.update(step=torch.tensor(0.0), sum=torch.full(p.shape, group["initial_accumulator_value"],
                                                                        dtype=p.dtype, device=p.device).to(torch.float64))
                state["step"] += 1
                clr = group["lr"] / (1 + (state["step"].item() - 1) * group["lr_decay"])
                grad = p.grad.to(torch.float64)
                if group["maximize"]:
                    grad = -grad
                if grad.is_sparse:
                    if group["weight_decay"] != 0:
                        raise RuntimeError("weight_decay option is not compatible with sparse gradients")
                    grad = grad.coalesce()
                    index = tuple(grad._indices())
                    values = grad._values()
                    state["sum"][index] += values * values
                    std = state["sum"][index].sqrt() + group["eps"]
                    p[index] = (p[index].to(torch.float64) - clr * values / std).to(p.dtype)
                else:
                    if group["weight_decay"] != 0:
                        grad = grad + group["weight_decay"] * p.to(torch.float64)
                    state["sum"] += grad * grad
                    std = state["sum"].sqrt() + group["eps"]
                    p.copy_((p.to(torch.float64) - clr * grad / std).to(p.dtype))

    def load_state_dict(self, state_dict):
        """Keep the float64 accumulator (torch's load_state_dict casts state to the parameter's dtype)."""
        ids = [pid for group in state_dict["param_groups"] for pid in group["params"]]
        sums = {pid: state_dict["state"][pid]["sum"].clone() for pid in ids if pid in state_dict["state"]}
        super().load_state_dict(state_dict)
        for pid, p in zip(ids, (p for group in self.param_groups for p in group["params"])):
            if pid in sums:
                self.state[p]["sum"] = sums[pid].to(device=p.device, dtype=torch.float64)


# ---------------------------------------------------------------- coalesce

_COMPILED: set = set()


def compiling_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    """A faithful coalesce that, like one built on JAX's ``BCOO.sum_duplicates``, pays a
    "compilation" the first time it sees a shape (size, nnz, dtype): it sleeps
    ``CONFORMANCE_TEST_COMPILE_SECONDS`` (default 0.2) then. Right, merely slow: it must pass,
    never time out inside an example or be called flaky."""
    key = (tuple(tensor.shape), tensor.sparse_dim(), tensor._nnz(), tensor.dtype)
    if key not in _COMPILED:
        time.sleep(float(os.environ.get("CONFORMANCE_TEST_COMPILE_SECONDS", "0.2")))
        _COMPILED.add(key)
    return tensor.coalesce()


_CALLS = [0]


def alternating_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    """torch's coalesce, except that every second call with a value scales the values by 1 + 2**-10:
    a nondeterministic implementation (a race, an uninitialised buffer). It must be reported as
    nondeterministic, with both runs side by side -- never as a Hypothesis internal error."""
    result = tensor.coalesce()
    _CALLS[0] += 1
    if _CALLS[0] % 2 == 0 and result._nnz():
        return torch.sparse_coo_tensor(result._indices(), result._values() * (1 + 2.0 ** -10), result.shape).coalesce()
    return result


# ---------------------------------------------------------------- a restricted library

class DefaultsOnlyAdagrad(torch.optim.Adagrad):
    """An adapter to a library like FBGEMM's ``EXACT_ADAGRAD``, which has no ``lr_decay``, starts
    its accumulator at zero and cannot maximize: it raises Unsupported for those, and declares
    them, so that the generated search draws them at torch's default and still runs every example."""

    unsupported_options = {"lr_decay", "initial_accumulator_value", "maximize"}

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                 eps=1e-10, maximize=False, **kwargs):
        for name, value in (("lr_decay", lr_decay), ("initial_accumulator_value", initial_accumulator_value),
                            ("maximize", maximize)):
            if value:
                raise Unsupported(f"this library has no {name} (only torch's default)")
        super().__init__(params, lr=lr, weight_decay=weight_decay, eps=eps, **kwargs)


class UndeclaredDefaultsOnlyAdagrad(DefaultsOnlyAdagrad):
    """DefaultsOnlyAdagrad without the declaration: the search learns each option from the
    Unsupported message that names it."""

    unsupported_options = None
