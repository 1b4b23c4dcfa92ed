"""Driving a ``torch.optim.Optimizer`` class through an optimizer op's steps (one parameter, or
param groups), with a state_dict round trip mid-trajectory, and reading its state: how a
candidate, stock torch and the built-in optimizer backends are run."""

from __future__ import annotations

import dataclasses
import io
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from conformance.core.types import Mismatch, RunContext, Unsupported
from conformance.ops.optimizers.inputs import LifecycleInputs, OptimizerInputs, ParamGroupsInputs, grad_to_torch
from conformance.core.tensors import to_torch


SPARSE_ONLY_ATTRIBUTE = "sparse_gradients_only"


def require_accepted_gradients(optimizer_class: Any, grads: Sequence) -> None:
    """Unsupported when the optimizer declares ``sparse_gradients_only = True`` (a class attribute)
    and a step's gradient is dense: the harness sends dense gradients too (spec cases that write
    ``{dense: ...}``, the densified runs of adagrad-sparse-equals-dense, SparseAdam's documented
    dense-gradient error), and an optimizer made only for sparse ones says so instead of failing."""
    if getattr(optimizer_class, SPARSE_ONLY_ATTRIBUTE, False) and any(isinstance(g, np.ndarray) for g in grads):
        raise Unsupported(f"the optimizer declares {SPARSE_ONLY_ATTRIBUTE} = True and this input has a dense gradient")


def run_optimizer(optimizer_class: Callable[..., Any], inputs: OptimizerInputs, ctx: RunContext,
                  state_outputs: Mapping[str, str], *, resume_after: int | None = None) -> dict[str, Any]:
    """Construct ``optimizer_class([param], **hyperparameters)``, step once per gradient, and
    read ``param`` and the state entries named in ``state_outputs`` (output name -> state key).

    With ``resume_after=k`` the run is interrupted after step k as a training job would be: the
    optimizer's ``state_dict()`` goes through ``torch.save``/``torch.load``, and a fresh
    optimizer on a fresh copy of the parameter loads it and takes the remaining steps."""
    require_accepted_gradients(optimizer_class, inputs.grads)
    param = ctx.place("param", to_torch(inputs.param, ctx.dtype, ctx.torch_device))
    optimizer = optimizer_class([param], **inputs.hyperparameters)
    for step, grad in enumerate(inputs.grads, start=1):
        param.grad = grad_to_torch(grad, ctx)
        optimizer.step()
        if step == resume_after:
            fresh, optimizer = _resumed(optimizer_class, optimizer, [param], inputs.hyperparameters)
            param = fresh[0]
    return read_state(optimizer, param, state_outputs)


def read_state(optimizer: torch.optim.Optimizer, param: torch.Tensor, state_outputs: Mapping[str, str]) -> dict[str, Any]:
    """``param`` and the state entries ``state_outputs`` names (output name -> state key)."""
    state = optimizer.state[param]
    outputs: dict[str, Any] = {"param": param.detach()}
    for output, key in state_outputs.items():
        if key not in state:
            raise Mismatch(f"the optimizer's state has no {key!r} entry (torch's state key for {output}); "
                           f"it has {sorted(state)}")
        outputs[output] = state[key]
    return outputs


def _resumed(optimizer_class: Callable[..., Any], optimizer: torch.optim.Optimizer, params: list[torch.Tensor],
             constructor: Any) -> tuple[list[torch.Tensor], torch.optim.Optimizer]:
    """A fresh copy of ``params`` and a fresh optimizer that loaded ``optimizer``'s state_dict
    after a round trip through ``torch.save``/``torch.load`` (``constructor``: the keyword
    arguments, or the param groups with their params replaced in order)."""
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=False)  # a candidate's state may hold objects of its own
    fresh = [p.detach().clone() for p in params]
    if isinstance(constructor, dict):
        new = optimizer_class(fresh, **constructor)
    else:
        remaining = iter(fresh)
        new = optimizer_class([{**group, "params": [next(remaining) for _ in group["params"]]}
                               for group in constructor])
    new.load_state_dict(saved)
    return fresh, new


def run_param_groups(optimizer_class: Callable[..., Any], inputs: ParamGroupsInputs, ctx: RunContext,
                     state_outputs: Mapping[str, str], *, resume_after: int | None = None
                     ) -> tuple[list[dict[str, Any]], list[torch.Tensor]]:
    """One optimizer over every parameter of ``inputs`` (one param group per group, with its first
    member's hyperparameters), stepped ``inputs.steps`` times: (the outputs of each member with a
    trajectory, in order, as :func:`run_optimizer` reads them; the idle parameters after the steps)."""
    for trajectory in inputs.members:
        require_accepted_gradients(optimizer_class, trajectory.grads)
    params, groups = [], []
    for group in inputs.groups:
        hyper = next(m.hyperparameters for m in group if isinstance(m, OptimizerInputs))
        tensors = [ctx.place("param", to_torch(m.param if isinstance(m, OptimizerInputs) else m, ctx.dtype,
                                                ctx.torch_device)) for m in group]
        params += tensors
        groups.append({"params": tensors, **hyper})
    flat = [m for group in inputs.groups for m in group]
    optimizer = optimizer_class(groups)
    for step in range(1, inputs.steps + 1):
        for member, param in zip(flat, params):
            if isinstance(member, OptimizerInputs):
                param.grad = grad_to_torch(member.grads[step - 1], ctx)
        optimizer.step()
        if step == resume_after:
            params, optimizer = _resumed(optimizer_class, optimizer, params, groups)
    outputs = [read_state(optimizer, p, state_outputs) for m, p in zip(flat, params) if isinstance(m, OptimizerInputs)]
    return outputs, [p.detach() for m, p in zip(flat, params) if not isinstance(m, OptimizerInputs)]


def optimizer_problem(candidate: Any) -> str | None:
    if not (isinstance(candidate, type) and issubclass(candidate, torch.optim.Optimizer)):
        return f"{candidate!r} is not a torch.optim.Optimizer subclass"
    return None


def _lifecycle_lr(base: float, scale: float, inputs: LifecycleInputs) -> Any:
    """The lr of a group the run makes: ``base * scale``, as a new 0-d tensor where the life gives lr as one."""
    value = base * scale
    return torch.tensor(value) if inputs.tensor_lr or inputs.lr_in_place else value


def _schedule_lr(group: dict, base: float, scale: float, inputs: LifecycleInputs) -> None:
    """Set a group's lr before a step as a scheduler does: a new value (a float or a new 0-d tensor), or, where
    the life changes it in place, ``fill_`` on the group's own lr tensor (torch reads it at every step)."""
    if inputs.lr_in_place:
        group["lr"].fill_(base * scale)
    else:
        group["lr"] = _lifecycle_lr(base, scale, inputs)


READABLE = (torch.Tensor, np.ndarray, np.generic, int, float, bool)  # the state values the suite can compare


def whole_state(optimizer: torch.optim.Optimizer, param: torch.Tensor) -> dict[str, Any]:
    """``param`` and every entry of its state the suite can read (tensors, arrays, numbers: an adapter's own
    objects left out; none where the optimizer made no state)."""
    state = optimizer.state.get(param, {})
    return {"param": param.detach(),
            **{f"state[{key!r}]": value for key, value in state.items() if isinstance(value, READABLE)}}


def _member_context(ctx: RunContext, member) -> RunContext:
    """The run context of one lifecycle member: the item's, in the member's own dtype where it has one."""
    return ctx if member.dtype is None else dataclasses.replace(ctx, dtype=getattr(torch, member.dtype))


def run_lifecycle(optimizer_class: Callable[..., Any], inputs: LifecycleInputs, ctx: RunContext, base_lr: float
                  ) -> list[dict[str, Any]]:
    """One optimizer through ``inputs``' life: the members of step 0 in the constructor, each later one by
    ``add_param_group`` before its first step, every group's lr set before each step (``base_lr`` times the
    step's scale; :func:`_schedule_lr`), each parameter's gradient or None, and after ``resume_after`` the
    state_dict through ``torch.save``/``torch.load(weights_only=True)`` into a fresh optimizer over fresh
    copies. Returns each member's parameter and whole state after the run, in order."""
    for member in inputs.members:
        require_accepted_gradients(optimizer_class, [g for g in member.grads if g is not None])
    contexts = [_member_context(ctx, m) for m in inputs.members]
    params = [to_torch(m.param, c.dtype, c.torch_device) for m, c in zip(inputs.members, contexts)]

    def hyper() -> dict[str, Any]:  # a group's own lr object (a tensor changed in place is the group's)
        return {**inputs.hyperparameters, "lr": _lifecycle_lr(base_lr, 1.0, inputs)}

    optimizer = optimizer_class([{"params": [p for m, p in zip(inputs.members, params) if m.start == 0]}], **hyper())
    added: list[int] = []
    for step in range(inputs.steps):
        for index, member in enumerate(inputs.members):
            if member.start and member.start == step:
                optimizer.add_param_group({"params": [params[index]], **hyper()})
                added.append(index)
        for group in optimizer.param_groups:
            _schedule_lr(group, base_lr, inputs.lr_scales[step], inputs)
        for member, param, member_ctx in zip(inputs.members, params, contexts):
            grad = None if member.frozen else member.grads[step]
            param.grad = None if grad is None else grad_to_torch(grad, member_ctx)
        optimizer.step()
        if inputs.resume_after == step + 1:
            params = [p.detach().clone() for p in params]
            optimizer = _round_trip(optimizer, step + 1, lambda: optimizer_class(
                [{"params": [params[i] for i, m in enumerate(inputs.members) if m.start == 0]}], **hyper()),
                [{"params": [params[index]], **hyper()} for index in added])
    return [whole_state(optimizer, p) for p in params]


def _round_trip(optimizer: torch.optim.Optimizer, step: int, make: Any, groups: list[dict]) -> torch.optim.Optimizer:
    """A fresh optimizer (``make()``, then ``groups`` added by add_param_group) that loaded ``optimizer``'s
    state_dict after ``torch.save``/``torch.load(weights_only=True)``; Mismatch where that load fails."""
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    try:
        saved = torch.load(buffer, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - what torch's weights_only unpickler refuses, named
        raise Mismatch(f"the state_dict saved after step {step} cannot be loaded with "
                       f"torch.load(weights_only=True): {type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
    fresh = make()
    for group in groups:
        fresh.add_param_group(group)
    fresh.load_state_dict(saved)
    return fresh


def run_member_alone(optimizer_class: Callable[..., Any], inputs: LifecycleInputs, index: int, ctx: RunContext,
                     base_lr: float) -> dict[str, Any]:
    """Member ``index`` in an optimizer of its own, stepped only where it has a gradient, with the lr in
    effect at each of those steps, set as the lifecycle run sets it: what that run must leave it as."""
    member = inputs.members[index]
    ctx = _member_context(ctx, member)
    param = to_torch(member.param, ctx.dtype, ctx.torch_device)
    optimizer = optimizer_class([param], **{**inputs.hyperparameters, "lr": _lifecycle_lr(base_lr, 1.0, inputs)})
    for step in range(member.start, inputs.steps):
        grad = None if member.frozen else member.grads[step]
        if grad is None:
            continue
        _schedule_lr(optimizer.param_groups[0], base_lr, inputs.lr_scales[step], inputs)
        param.grad = grad_to_torch(grad, ctx)
        optimizer.step()
    return whole_state(optimizer, param)


def run_scaled(optimizer_class: Callable[..., Any], inputs: OptimizerInputs, ctx: RunContext,
               scaling: list[tuple[float, bool]]) -> dict[str, Any]:
    """Step as ``torch.amp.GradScaler`` steps an optimizer that takes the scaling itself (torch's fused
    steps): before each step ``optimizer.grad_scale`` (a float32 0-d tensor on the device) and
    ``optimizer.found_inf`` (1.0 where ``scaling`` says the step overflowed, else 0.0); the gradient is
    the step's multiplied by the scale, or inf everywhere at an overflowed step. Returns the parameter
    and its whole state."""
    require_accepted_gradients(optimizer_class, inputs.grads)
    param = ctx.place("param", to_torch(inputs.param, ctx.dtype, ctx.torch_device))
    optimizer = optimizer_class([param], **inputs.hyperparameters)
    for (scale, overflowed), step_grad in zip(scaling, inputs.grads):
        grad = grad_to_torch(step_grad, ctx)
        optimizer.grad_scale = torch.tensor(scale, dtype=torch.float32, device=ctx.torch_device)
        optimizer.found_inf = torch.tensor(1.0 if overflowed else 0.0, dtype=torch.float32, device=ctx.torch_device)
        param.grad = torch.full_like(grad, float("inf")) if overflowed else grad * scale
        optimizer.step()
    return whole_state(optimizer, param)


def run_whole(optimizer_class: Callable[..., Any], inputs: OptimizerInputs, ctx: RunContext) -> dict[str, Any]:
    """The plain steps (no scaling) on ``inputs``: the parameter and its whole state (none where the
    optimizer never stepped and made none)."""
    require_accepted_gradients(optimizer_class, inputs.grads)
    param = ctx.place("param", to_torch(inputs.param, ctx.dtype, ctx.torch_device))
    optimizer = optimizer_class([param], **inputs.hyperparameters)
    for grad in inputs.grads:
        param.grad = grad_to_torch(grad, ctx)
        optimizer.step()
    return whole_state(optimizer, param)
