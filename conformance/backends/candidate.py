"""``candidate``: a user's implementation of one op, given as ``OP=module:attr``, run as a
backend of its own through that op's candidate contract.

Every call is checked against the contract beyond the numbers (a violation is a
:class:`~conformance.compare.Mismatch`, outcome ``failed``, one line naming the clause:
``contract violated (<op>: <clause>): got ...``), before the harness reads any output:

* coalesce: the result is a sparse COO ``torch.Tensor`` (not a dense one, not a MaskedTensor) of
  the input's dtype, device and size;
* masked_mean, masked_mean_compiles: the result is a plain (strided, not a MaskedTensor) 0-d tensor
  of ``values.dtype`` on ``values.device``; its gradient ``values.grad`` is a plain tensor of values'
  shape, dtype and device (checked in ``conformance.ops.masked_mean.differentiate``);
* adagrad, sparse_adam, sgd: ``step()`` leaves ``param.grad`` -- the gradient the harness set -- as
  it was (same tensor, same indices and values); after each step the state tensors the harness reads
  are plain strided tensors (not sparse, not MaskedTensor); the parameter keeps its dtype and device,
  and those state tensors are on its device and of its shape (their dtype is free: float32 state for
  a float16 parameter is allowed);
* every op: the tensors handed to the candidate are unchanged after the call (compared with
  copies taken before it), and the candidate works on its own copy of the decoded inputs, so a
  mutation cannot reach the reference check or another item.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

import torch

from conformance.types import RunContext
from conformance.backends.base import Backend, torch_kernels_missing_are_unsupported
from conformance.compare import Mismatch
from conformance.ops import OPS
from conformance.tensors import is_masked_tensor, not_plain_tensor


class CandidateError(ValueError):
    """A ``--conformance-impl`` value that cannot be turned into a candidate backend."""


def load_object(target: str) -> Any:
    """Import ``module:attr`` (dotted attr allowed) or ``path/to/file.py:attr``."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise CandidateError(f"{target!r} is not of the form module:attr or path/to/file.py:attr")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise CandidateError(f"{target!r}: no such file {path}")
        spec = importlib.util.spec_from_file_location(f"conformance_candidate_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise CandidateError(f"{target!r}: importing {path} raised {type(exc).__name__}: {exc}") from exc
    else:
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise CandidateError(f"{target!r}: importing {module_name} raised {type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CandidateError(f"{target!r}: {module_name} has no attribute {attr!r}") from None
    return obj


class CandidateBackend(Backend):
    """Runs user-supplied implementations, one per op, through each op's candidate contract.

    Unlike the built-in backends it gets items only for the ops it was given.
    """

    lists_unimplemented_ops = False
    judged_against_torch = True

    def __init__(self, name: str, candidates: dict[str, Any], description: str = ""):
        self.name = name
        self.description = description or "user-supplied implementation"
        self.candidates = dict(candidates)
        super().__init__({op: self._runner(op, obj) for op, obj in candidates.items()})

    def run(self, op: str, inputs: Any, ctx: RunContext) -> dict[str, Any]:
        # a candidate built on torch meets torch's missing kernels (float16 sparse adds on cpu): it
        # cannot run this example, as stock torch cannot
        with torch_kernels_missing_are_unsupported(ctx.device, "the candidate"):
            return super().run(op, inputs, ctx)

    def drive_optimizer(self, op: str, ctx: RunContext, use):
        with torch_kernels_missing_are_unsupported(ctx.device, "the candidate"):
            return super().drive_optimizer(op, ctx, use)

    def optimizer_class(self, op: str):
        if op not in self.candidates or not OPS[op].is_optimizer:
            return None
        return contract_check(op)(op, self.candidates[op])

    @staticmethod
    def _runner(op_name: str, candidate: Any):
        return checked_runner(op_name, candidate)


# ------------------------------------------------------------------ contract checks


def checked_runner(op_name: str, candidate: Any) -> Callable[[Any, RunContext], dict[str, Any]]:
    """``run(inputs, ctx)``: the op's ``run_candidate`` with the contract checks of this module."""
    op = OPS[op_name]
    wrap = contract_check(op_name)

    def run(inputs: Any, ctx: RunContext):
        own = copy.deepcopy(inputs)  # the runner's inputs feed the reference check: keep them out of reach
        outputs = op.run_candidate(wrap(op_name, candidate), own, ctx)
        if op.is_optimizer:
            _check_optimizer_outputs(op_name, outputs, ctx)
        return outputs

    return run


def _violation(op_name: str, clause: str, detail: str) -> Mismatch:
    return Mismatch(f"contract violated ({op_name}: {clause}): {detail}")


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def _snapshot(tensor: torch.Tensor) -> torch.Tensor:
    # compared on the CPU: on XLA a device-side copy and comparison would add graphs of their own
    # to the compile counts measured around the candidate (masked_mean_compiles)
    return tensor.detach().to("cpu", copy=True)


def _changed(tensor: torch.Tensor, before: torch.Tensor) -> str | None:
    """How ``tensor`` differs from the copy ``before`` (bit for bit, NaN equal to NaN), or None."""
    now = tensor.detach().cpu()
    if now.layout != before.layout or now.dtype != before.dtype or now.shape != before.shape:
        return (f"it became {now.layout}/{now.dtype}/{list(now.shape)}, was "
                f"{before.layout}/{before.dtype}/{list(before.shape)}")
    if now.layout == torch.sparse_coo:
        if now.is_coalesced() != before.is_coalesced():
            return f"is_coalesced() became {now.is_coalesced()}"
        if not torch.equal(now._indices(), before._indices()):
            return "its indices were changed"
        return None if _equal(now._values(), before._values()) else "its values were changed"
    return None if _equal(now, before) else "its values were changed"


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape:
        return False
    if a.is_floating_point():
        same = (a == b) | (torch.isnan(a) & torch.isnan(b))
        return bool(same.all())
    return torch.equal(a, b)


def _watch_coalesce(op_name: str, candidate: Any):
    def watched(tensor: torch.Tensor):
        before = _snapshot(tensor)
        result = candidate(tensor)
        change = _changed(tensor, before)
        if change:
            raise _violation(op_name, "the input tensor is left unchanged", change)
        problem = not_plain_tensor(result, torch.sparse_coo)
        if problem:
            raise _violation(op_name, "the result is a sparse COO torch.Tensor", problem)
        if result.dtype != tensor.dtype:
            raise _violation(op_name, "the result has the input's dtype",
                             f"got {result.dtype}, the input is {tensor.dtype}")
        if not _same_device(result.device, tensor.device):
            raise _violation(op_name, "the result is on the input's device",
                             f"got {result.device}, the input is on {tensor.device}")
        if tuple(result.shape) != tuple(tensor.shape):
            raise _violation(op_name, "the result has the input's size",
                             f"got {list(result.shape)}, the input is {list(tensor.shape)}")
        return result

    return watched


def _watch_masked_mean(op_name: str, candidate: Any):
    def watched(values: torch.Tensor, mask: torch.Tensor):
        before = {"values": _snapshot(values), "mask": _snapshot(mask)}
        result = candidate(values, mask)
        for name, tensor in (("values", values), ("mask", mask)):
            change = _changed(tensor, before[name])
            if change:
                raise _violation(op_name, f"the input {name} is left unchanged", change)
        problem = not_plain_tensor(result)
        if problem:
            raise _violation(op_name, "the result is a plain (strided) 0-d torch.Tensor", problem)
        if result.dim() != 0:
            raise _violation(op_name, "the result is a 0-d tensor", f"got shape {list(result.shape)}")
        if result.dtype != values.dtype:
            raise _violation(op_name, "the result has values.dtype",
                             f"got {result.dtype}, values are {values.dtype}")
        if not _same_device(result.device, values.device):
            raise _violation(op_name, "the result is on values' device",
                             f"got {result.device}, values are on {values.device}")
        return result

    return watched


def _watch_optimizer(op_name: str, candidate: Any):
    def build(params, *args, **kwargs):
        optimizer = candidate(params, *args, **kwargs)
        step = optimizer.step

        def checked_step(*step_args, **step_kwargs):
            given = [(p, p.grad, None if p.grad is None else _snapshot(p.grad))
                     for group in optimizer.param_groups for p in group["params"]]
            result = step(*step_args, **step_kwargs)
            for param, grad, before in given:
                if param.grad is not grad:
                    raise _violation(op_name, "step() leaves param.grad, the gradient the harness set",
                                     "step() replaced param.grad with another tensor")
                change = None if grad is None else _changed(grad, before)
                if change:
                    raise _violation(op_name, "step() leaves param.grad, the gradient the harness set",
                                     f"step() rewrote it: {change}")
            _check_optimizer_state(op_name, optimizer, [param for param, _, _ in given])
            return result

        optimizer.step = checked_step
        return optimizer

    build.sparse_gradients_only = getattr(candidate, "sparse_gradients_only", False)  # (declared on the class)
    return build




def _check_optimizer_outputs(op_name: str, outputs: dict[str, Any], ctx: RunContext) -> None:
    param = outputs.get("param")
    if not isinstance(param, torch.Tensor):
        return
    if param.dtype != ctx.dtype or not _same_device(param.device, ctx.torch_device):
        raise _violation(op_name, "the parameter keeps its dtype and device",
                         f"after the steps it is {param.dtype} on {param.device}, was {ctx.dtype} on {ctx.device}")
    for name in OPS[op_name].state_tensors:  # checked for the parameter's device and shape
        state = outputs.get(name)
        _check_state_tensor(op_name, name, state)
        if not isinstance(state, torch.Tensor):
            continue
        if not _same_device(state.device, param.device):
            raise _violation(op_name, "state tensors are on the parameter's device",
                             f"{name} is on {state.device}, the parameter on {param.device}")
        if tuple(state.shape) != tuple(param.shape):
            raise _violation(op_name, "state tensors have the parameter's shape",
                             f"{name} has shape {list(state.shape)}, the parameter {list(param.shape)}")


def _check_state_tensor(op_name: str, name: str, state: Any) -> None:
    """A state tensor the harness reads (``name``: its output name) is a plain strided tensor: a
    sparse or MaskedTensor state cannot be indexed or read like torch's dense state."""
    if is_masked_tensor(state) or (isinstance(state, torch.Tensor) and state.layout != torch.strided):
        raise _violation(op_name, "state tensors are plain (strided) torch.Tensors",
                         f"{name} (state key {OPS[op_name].state_outputs[name]!r}): {not_plain_tensor(state)}")


def _check_optimizer_state(op_name: str, optimizer: Any, params: list) -> None:
    """After each step: the state entries the harness will read, before anything reads them."""
    op = OPS[op_name]
    for param in params:
        state = optimizer.state.get(param, {}) if hasattr(optimizer, "state") else {}
        for name in op.state_tensors:
            key = op.state_outputs[name]
            if key in state:
                _check_state_tensor(op_name, name, state[key])


CONTRACT_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "coalesce": _watch_coalesce,
    "masked_mean": _watch_masked_mean,
    "masked_mean_compiles": _watch_masked_mean,
}


def contract_check(op_name: str) -> Callable[[str, Any], Any]:
    """The watch of ``op_name``'s contract this module wraps a candidate in (every optimizer's:
    :func:`_watch_optimizer`; none for an op without one)."""
    if op_name in CONTRACT_CHECKS:
        return CONTRACT_CHECKS[op_name]
    return _watch_optimizer if OPS[op_name].is_optimizer else (lambda name, obj: obj)


def parse_impl_options(values: list[str]) -> dict[str, tuple[str, Any]]:
    """``["adagrad=pkg.mod:MyAdagrad", ...]`` -> {op: (target, object)}, with clear errors."""
    candidates: dict[str, tuple[str, Any]] = {}
    for value in values:
        op_name, sep, target = value.partition("=")
        op_name = op_name.strip()
        if not sep:
            raise CandidateError(f"--conformance-impl {value!r}: expected OP=module:attr")
        if op_name not in OPS:
            raise CandidateError(f"--conformance-impl {value!r}: unknown op {op_name!r}; "
                                 f"known ops: {', '.join(sorted(OPS))}")
        if op_name in candidates:
            raise CandidateError(f"--conformance-impl given twice for op {op_name!r}")
        obj = load_object(target.strip())
        problem = OPS[op_name].candidate_problem(obj)
        if problem:
            raise CandidateError(f"--conformance-impl {value!r}: {problem}; "
                                 f"{op_name} needs {OPS[op_name].candidate_contract}")
        candidates[op_name] = (target.strip(), obj)
    return candidates
