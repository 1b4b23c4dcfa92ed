"""The contract every optimizer candidate is held to beyond the numbers (``OptimizerOp.watch_candidate``
and ``check_candidate_outputs``): ``step()`` leaves ``param.grad`` -- the gradient the harness set -- as
it was (same tensor, same indices and values); after each step the state tensors the harness reads
are plain strided tensors (not sparse, not MaskedTensor); the parameter keeps its dtype and device,
and those state tensors are on its device and of its shape (their dtype is free: float32 state for
a float16 parameter is allowed)."""

from __future__ import annotations

import re
from typing import Any

import torch

from conformance.core.forks import leave_if_forked
from conformance.core.types import RunContext
from conformance.ops.contract import changed, check_like, same_device, snapshot, violation
from conformance.core.tensors import is_masked_tensor, not_plain_tensor


def watch_optimizer(op: Any, candidate: Any):
    """``candidate`` (an optimizer class) wrapped: each ``step()`` of what it builds is watched."""
    op_name = op.name

    def build(params, *args, **kwargs):
        try:
            optimizer = candidate(params, *args, **kwargs)
        except TypeError as exc:
            hint = option_not_taken(op, candidate, exc, kwargs)
            if hint is None:
                raise
            raise TypeError(f"{exc}; {hint}") from exc
        step = optimizer.step

        def checked_step(*step_args, **step_kwargs):
            given = [(p, p.grad, None if p.grad is None else snapshot(p.grad))
                     for group in optimizer.param_groups for p in group["params"]]
            try:
                result = step(*step_args, **step_kwargs)
            finally:
                leave_if_forked()  # a forked copy goes no further: its next steps would fork again
            for param, grad, before in given:
                if param.grad is not grad:
                    raise violation(op_name, "step() leaves param.grad, the gradient the harness set",
                                    "step() replaced param.grad with another tensor")
                change = None if grad is None or before is None else changed(grad, before)
                if change:
                    raise violation(op_name, "step() leaves param.grad, the gradient the harness set",
                                    f"step() rewrote it: {change}")
            check_optimizer_state(op, optimizer, [param for param, _, _ in given])
            return result

        # past a __setattr__ of the candidate's own, and checked: a candidate whose step() the harness
        # could not watch would escape the clauses above
        object.__setattr__(optimizer, "step", checked_step)
        if vars(optimizer).get("step") is not checked_step:
            raise violation(op_name, "the harness can wrap step() on the optimizer object to watch it",
                            "setting the instance attribute 'step' did not take")
        return optimizer

    # (setattr: attributes of a function, which mypy does not model; declared on the candidate's class)
    setattr(build, "sparse_gradients_only", getattr(candidate, "sparse_gradients_only", False))
    # (the property complex-agrees reads it: declared, or torch's capability for a subclass of torch's own
    # optimizer -- torch's documented complex semantics -- or None, said nothing: cases/complex_dtypes.py)
    declared = getattr(candidate, "supports_complex", None)
    torch_class = op.torch_implementation
    setattr(build, "supports_complex", True if declared is None and isinstance(candidate, type) and issubclass(
        candidate, torch_class) else declared)
    # (the property grad-scaling reads it: a step that takes optimizer.grad_scale/found_inf, as torch's fused ones)
    setattr(build, "supports_grad_scaling", getattr(candidate, "supports_grad_scaling", False))
    return build


def option_not_taken(op: Any, candidate: Any, error: TypeError, kwargs: dict) -> str | None:
    """What to do about a constructor that rejects one of the op's options (``TypeError: ... got an
    unexpected keyword argument 'maximize'``): the way to say it does not support it. None for any
    other TypeError."""
    match = re.search(r"unexpected keyword argument '(\w+)'", str(error))
    if match is None or match.group(1) not in kwargs or match.group(1) not in op.option_names():
        return None
    name, owner = match.group(1), getattr(candidate, "__qualname__", "the candidate")
    return (f"torch.optim.{op.torch_implementation.__name__}'s constructor takes {name!r}. If {owner} does not support it, "
            f"take it and raise conformance.Unsupported when it is set (such a case is then unsupported, "
            f"not an error); unsupported_options = {{{name!r}}} on the class also keeps the generated "
            f"items' draws at torch's default (docs/generated.md)")


def check_optimizer_outputs(op: Any, outputs: dict[str, Any], ctx: RunContext) -> None:
    """The parameter and the state tensors read after the steps."""
    op_name = op.name
    param = outputs.get("param")
    if not isinstance(param, torch.Tensor):
        return
    if param.dtype != ctx.dtype or not same_device(param.device, ctx.torch_device):
        raise violation(op_name, "the parameter keeps its dtype and device",
                        f"after the steps it is {param.dtype} on {param.device}, was {ctx.dtype} on {ctx.device}")
    for name in op.state_tensors:  # checked for the parameter's device and shape
        state = outputs.get(name)
        check_state_tensor(op, name, state)
        if not isinstance(state, torch.Tensor):
            continue
        check_like(op_name, state, param, subject=f"the state tensor {name}", owner="the parameter's",
                   owner_is="the parameter is", clauses=("device", "shape"))  # its dtype is free


def check_state_tensor(op: Any, name: str, state: Any) -> None:
    """A state tensor the harness reads (``name``: its output name) is a plain strided tensor: a
    sparse or MaskedTensor state cannot be indexed or read like torch's dense state."""
    if is_masked_tensor(state) or (isinstance(state, torch.Tensor) and state.layout != torch.strided):
        raise violation(op.name, "state tensors are plain (strided) torch.Tensors",
                        f"{name} (state key {op.state_outputs[name]!r}): {not_plain_tensor(state)}")


def check_optimizer_state(op: Any, optimizer: Any, params: list) -> None:
    """After each step: the state entries the harness will read, before anything reads them."""
    for param in params:
        state = optimizer.state.get(param, {}) if hasattr(optimizer, "state") else {}
        for name in op.state_tensors:
            key = op.state_outputs[name]
            if key in state:
                check_state_tensor(op, name, state[key])
