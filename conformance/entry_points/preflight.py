"""What ``conformance check`` verifies once, before any item runs, so that a candidate or a device
that cannot work is one usage error (exit 4, within seconds) instead of dozens of erroring items:

- the device: ``--device xla`` without torch_xla installed (:func:`early_device_problem`, before
  torch is imported), ``--device cuda`` where ``torch.cuda.is_available()`` is False, a device name
  the suite does not know (:func:`device_problem`);
- the candidate's kind against its op (:func:`kind_problem`): an optimizer op (adagrad, sgd,
  sparse_adam) needs a class with ``step()`` (the op record then asks for a
  ``torch.optim.Optimizer`` subclass), a functional op (coalesce, masked_mean) a callable that is
  not an optimizer class;
- an optimizer class's constructor against the call the op makes, ``Cls(params,
  **hyperparameters)`` (:func:`constructor_problem`): a required argument beyond the parameters
  and the op's hyperparameters is named, with what the op passes.

Check runs :func:`probe` in the child process that imports the candidate (``PROBE`` in
:mod:`conformance.entry_points.check`): an import that ends or hangs the process cannot end check.
Nothing here imports torch or the op records at module level.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from typing import Any

from conformance.core.target import TargetError, parse_targets


def _devices(text: str) -> list[str]:
    return [part.strip() for part in str(text).split(",") if part.strip()]


def early_device_problem(devices: str) -> str | None:
    """What the command line and the installed packages alone show is wrong with ``--device``
    (torch not imported): ``xla`` without torch_xla."""
    if "xla" in _devices(devices) and importlib.util.find_spec("torch_xla") is None:
        return ("--device xla: torch_xla is not installed here (no module named 'torch_xla'), so there is no XLA "
                "device to run on; install the torch_xla build that matches torch (docs/xla.md), or leave xla out "
                "of --device (e.g. --device cpu)")
    return None


def device_problem(devices: str) -> str | None:
    """What is wrong with ``--device`` in this process, with torch imported: an unknown name, ``cuda``
    without CUDA, ``xla`` without torch_xla."""
    # lazy: torch and the op records load in the probe's child process, not in check's (the module docstring)
    import torch

    from conformance.core.devices import DEVICES

    names = _devices(devices)
    if not names:
        return f"--device {devices!r}: no device named; known: {', '.join(DEVICES)}"
    unknown = [name for name in names if name not in DEVICES]
    if unknown:
        return f"--device {devices}: unknown device(s) {', '.join(unknown)}; known: {', '.join(DEVICES)}"
    if "cuda" in names and not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        return (f"--device cuda: CUDA is not available here (torch.cuda.is_available() is False; torch "
                f"{torch.__version__}, {build}); run on a machine with an NVIDIA GPU and a CUDA build of torch, "
                "or leave cuda out of --device (e.g. --device cpu)")
    return early_device_problem(devices)


def _name(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__


def _is_optimizer_class(obj: Any) -> bool:
    import torch  # lazy: see device_problem

    return isinstance(obj, type) and issubclass(obj, torch.optim.Optimizer)


def _ops_where(optimizer: bool) -> str:
    from conformance.ops import OPS  # lazy: see device_problem

    return ", ".join(name for name, op in OPS.items() if op.is_optimizer == optimizer)


def kind_problem(op_name: str, obj: Any) -> str | None:
    """Why ``obj`` is the wrong kind of thing for ``op_name`` (an optimizer op needs a class whose
    instances step; a functional op a callable that is not an optimizer class), or None. The op
    record's own :meth:`~conformance.ops.base.Op.candidate_problem` comes after this."""
    from conformance.ops import OPS  # lazy: see device_problem

    op = OPS[op_name]
    if op.is_optimizer:
        if not isinstance(obj, type):
            what = "a function" if inspect.isroutine(obj) else f"an object of type {type(obj).__name__}"
            return (f"{_name(obj)} is {what}, not a class: {op_name} is an optimizer op, which constructs its "
                    f"candidate as Cls(params, **hyperparameters) and calls step() (a function fits the "
                    f"functional ops: {_ops_where(False)})")
        if not callable(getattr(obj, "step", None)):
            return (f"{_name(obj)} is a class without a step() method: {op_name} is an optimizer op, which calls "
                    "step() on the instance it constructs")
        return None
    if _is_optimizer_class(obj) or (isinstance(obj, type) and callable(getattr(obj, "step", None))):
        kind = "a torch.optim.Optimizer subclass" if _is_optimizer_class(obj) else "a class with step()"
        return (f"{_name(obj)} is {kind}, an optimizer's candidate: {op_name} is a functional op, which calls its "
                f"candidate on tensors and reads what it returns (an optimizer fits the optimizer ops: "
                f"{_ops_where(True)})")
    return None


def constructor_problem(op_name: str, cls: Any) -> str | None:
    """Why the op cannot construct ``cls`` as it does, ``cls(params, **hyperparameters)`` with
    hyperparameters among the op's (torch's constructor's keywords), or None: a required argument
    beyond the parameters and those, or no positional argument for the parameters."""
    from conformance.ops import OPS  # lazy: see device_problem

    op = OPS[op_name]
    if not op.is_optimizer or not isinstance(cls, type):
        return None
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # a signature Python cannot read: the run will tell
        return None
    hyper = tuple(op.option_names())
    torch_class = getattr(op.torch_implementation, "__qualname__", None)
    passes = (f"{op_name} calls {_name(cls)}(params, **hyperparameters) with keyword hyperparameters among "
              f"{', '.join(hyper) or '(none)'}" + (f" (torch.optim.{torch_class}'s constructor)" if torch_class else "")
              + " and nothing else")
    parameters = list(signature.parameters.values())
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not positional and not any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return f"{_name(cls)}'s constructor {signature} takes no positional argument for the parameters: {passes}"
    rest = [p for p in parameters if not positional or p is not positional[0]]
    required = [p for p in rest if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    extra = [p.name for p in required if p.kind == p.POSITIONAL_ONLY or p.name not in hyper]
    if extra:
        names = ", ".join(repr(name) for name in extra)
        them = "it" if len(extra) == 1 else "them"
        return (f"{_name(cls)}'s constructor {signature} requires {names}, which {op_name} does not pass: {passes}; "
                f"give {them} a default or take {them} out of the constructor")
    return None


def candidate_problems(targets: list[Any]) -> str | None:
    """Each target imported and checked (its kind, its op record's contract, its constructor): the
    first problem, as one line naming the target and what its op expects, or None."""
    # lazy: see device_problem
    from conformance.backends.candidate import CandidateError, load_object
    from conformance.ops import OPS

    for target in targets:
        try:
            obj = load_object(target)
        except CandidateError as exc:
            return str(exc)
        op = OPS[target.op]
        problem = kind_problem(target.op, obj) or op.candidate_problem(obj) or constructor_problem(target.op, obj)
        if problem:
            return f"{str(target)!r}: {problem}; {target.op} needs {op.candidate_contract}"
    return None


def probe(devices: str, texts: list[str], *, ok: str, usage: int) -> int:
    """The child process's part of check (``PROBE``): the device, then each candidate. Prints ``ok``
    when all is well (status 0), else ``conformance check: <the problem>`` on stderr (status ``usage``)."""
    try:
        targets = parse_targets(texts)
    except TargetError as exc:
        problem: str | None = str(exc)
    else:
        from conformance.ops import OPS  # lazy: see device_problem

        unknown = [t for t in targets if t.op not in OPS]
        problem = (f"{str(unknown[0])!r}: unknown op {unknown[0].op!r}; known ops: {', '.join(sorted(OPS))}"
                   if unknown else device_problem(devices) or candidate_problems(targets))
    if problem:
        print(f"conformance check: {problem}", file=sys.stderr)
        return usage
    print(ok)
    return 0
