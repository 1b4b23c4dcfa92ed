"""The property complex-agrees (the complex dimension of the optimizers' input space): an optimizer on
complex parameters equals itself on their ``torch.view_as_real``, as torch documents, or refuses them
as torch does."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import torch

from conformance.cases.trial import Trial
from conformance.core import tolerances
from conformance.core.compare import compare_outputs
from conformance.core.tensors import CooArray, to_numpy, torch_dtype
from conformance.core.types import Mismatch, RunContext, Unsupported, exception_text
from conformance.ops.optimizers.drive import READABLE, require_accepted_gradients
from conformance.ops.optimizers.inputs import OptimizerInputs, grad_to_torch

COMPLEX_AGREES = "complex-agrees"  # the property (an optimizer record declares it; divergences name it)
COMPLEX_OF = MappingProxyType({"float32": torch.complex64, "float64": torch.complex128})
# a candidate opts in to complex-agrees with this class attribute (torch's OptimizerInfo supports_complex): one
# written for real parameters, as most are, is not judged on complex ones (unsupported, with this reason)
SUPPORTS_COMPLEX = "supports_complex"


def _as_complex(inputs: OptimizerInputs, dtype: torch.dtype, device) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The example's parameter and gradients (last dim: real, imaginary) as complex tensors."""
    param = torch.view_as_complex(torch.from_numpy(inputs.param.copy()).to(dtype).to(device).contiguous())
    grads = []
    for grad in inputs.grads:
        if isinstance(grad, CooArray):
            parts = torch.from_numpy(grad.values.copy()).to(dtype).to(device).contiguous()
            values = (torch.view_as_complex(parts) if parts.numel() else
                      torch.zeros(parts.shape[:-1], dtype=COMPLEX_OF[str(dtype).replace("torch.", "")], device=device))
            grads.append(torch.sparse_coo_tensor(torch.from_numpy(grad.indices.copy()).to(device), values,
                                                 grad.size[:-1]))
        else:
            grads.append(torch.view_as_complex(torch.from_numpy(grad.copy()).to(dtype).to(device).contiguous()))
    return param, grads


def _complex_run(optimizer_class, inputs: OptimizerInputs, ctx: RunContext) -> dict[str, Any]:
    """The optimizer over the complex parameter (``ctx.dtype``: its parts' dtype): the parameter and its
    state's tensors as view_as_real. The tensors are built before the optimizer sees them: only the
    optimizer's own refusal escapes as torch's (a harness error raises RuntimeError before it)."""
    try:
        param, grads = _as_complex(inputs, ctx.dtype, ctx.torch_device)
    except Exception as exc:  # noqa: BLE001 - never mistaken for an optimizer's refusal
        raise RuntimeError(f"harness: the complex example could not be built: {exc}") from exc
    optimizer = optimizer_class([param], **inputs.hyperparameters)
    for grad in grads:
        param.grad = grad
        optimizer.step()
    state = _readable_state(optimizer, param)
    return {"param": torch.view_as_real(param.detach()),
            **{f"state[{key!r}]": torch.view_as_real(value) if torch.is_tensor(value) and value.is_complex() else value
               for key, value in state.items()}}


def _dense(value: Any) -> Any:
    """A sparse state tensor (SGD's momentum buffer of sparse gradients) as a dense one, to compare."""
    return value.to_dense() if torch.is_tensor(value) and value.is_sparse else value


def _readable_state(optimizer, param: torch.Tensor) -> dict[str, Any]:
    """The parameter's state entries the suite can read (drive.READABLE: an adapter's own objects left out),
    a sparse tensor made dense."""
    return {key: _dense(value) for key, value in optimizer.state.get(param, {}).items() if isinstance(value, READABLE)}


def _real_run(optimizer_class, inputs: OptimizerInputs, ctx: RunContext) -> dict[str, Any]:
    param = torch.from_numpy(inputs.param.copy()).to(ctx.dtype).to(ctx.torch_device)
    optimizer = optimizer_class([param], **inputs.hyperparameters)
    for grad in inputs.grads:
        param.grad = grad_to_torch(grad, ctx)
        optimizer.step()
    return {"param": param.detach(),
            **{f"state[{key!r}]": value for key, value in _readable_state(optimizer, param).items()}}


def declares_complex(optimizer_class, op) -> bool | None:
    """Whether a candidate is judged on complex parameters: what it says (``supports_complex``, torch's
    OptimizerInfo field), or, where it says nothing, torch's capability for a subclass of torch's own optimizer
    (True: it is held to it, a wrong result fails) and None for any other (not judged: most hand-written
    optimizers are written for real parameters, and their complex items are unsupported, naming the attribute)."""
    declared = getattr(optimizer_class, SUPPORTS_COMPLEX, None)
    if declared is not None:
        return bool(declared)
    torch_class = op.torch_implementation
    return True if isinstance(optimizer_class, type) and issubclass(optimizer_class, torch_class) else None


def check_complex_agrees(trial: Trial, inputs: OptimizerInputs) -> None:
    """torch's optimizers take a complex parameter as the pairs of reals torch.view_as_real shows
    (torch/optim/_functional: ``_view_as_real``; torch's test_complex): the optimizer over complex64/complex128
    parameters and gradients equals itself over their view_as_real, parameter and every state tensor, within
    the tolerance of a correct implementation (complex arithmetic rounds otherwise than on pairs of reals).
    Where torch refuses complex parameters (SparseAdam: ValueError), the backend refuses them with the same
    type of error. A failure names the complex dtype."""
    op = trial.op
    ctx = RunContext(trial.device, torch_dtype(trial.dtype))
    complex_dtype = COMPLEX_OF[trial.dtype]
    name = str(complex_dtype).replace("torch.", "")
    torch_refusal = None
    _as_complex(inputs, ctx.dtype, ctx.torch_device)  # (a harness error here is an error, never a refusal)
    try:
        _complex_run(op.torch_implementation, inputs, ctx)
    except Exception as refusal:  # noqa: BLE001 - torch's documented refusal of complex parameters
        torch_refusal = refusal

    def runs(optimizer_class):
        declared = declares_complex(optimizer_class, op) if trial.backend.judged_against_torch else True
        if not declared:
            raise Unsupported(f"the candidate declares {SUPPORTS_COMPLEX} = False: not judged on {name} parameters"
                              if declared is False else
                              f"the candidate does not declare {SUPPORTS_COMPLEX} = True (a class attribute, torch's "
                              f"OptimizerInfo field; a subclass of torch's optimizer starts from torch's True): "
                              f"declare it to be judged on {name} parameters")
        require_accepted_gradients(optimizer_class, inputs.grads)  # a sparse-only optimizer's dense steps: unsupported
        try:
            got = _complex_run(optimizer_class, inputs, ctx)
        except Unsupported:
            raise
        except Exception as exc:  # noqa: BLE001
            if torch_refusal is not None and isinstance(exc, type(torch_refusal)):
                return None, None
            raise Mismatch(f"{name}: raises {exception_text(exc)} on complex parameters, "
                           + (f"where torch raises {exception_text(torch_refusal)}" if torch_refusal is not None
                              else "which torch's optimizer takes as pairs of reals")) from exc
        if torch_refusal is not None:
            raise Mismatch(f"{name}: steps complex parameters, where torch refuses them: "
                           f"{exception_text(torch_refusal)}")
        return got, _real_run(optimizer_class, inputs, ctx)

    got, want = trial.backend.drive_optimizer(op.name, ctx, runs)
    if got is None:
        return
    try:
        _assert_complex_matches_real(trial, inputs, got, want, name)
    except Mismatch as mismatch:
        trial.excuse_conditional(COMPLEX_AGREES, inputs, f"{name}: {str(mismatch).splitlines()[0]}", kind="mismatch")
        raise Mismatch(f"{name}: {mismatch}", mismatch.max_abs_error, mismatch.max_rel_error) from None


def _assert_complex_matches_real(trial: Trial, inputs: OptimizerInputs, got: dict, want: dict, name: str) -> None:
    """The complex run's parameter and state against the real view's, within the op's own tolerances."""
    op = trial.op
    against = f"the same optimizer on torch.view_as_real of the {name} parameter and gradients"
    by_output = tolerances.generated(op, inputs, trial.dtype)  # the real view is an example of the op's own
    tols = {"param": by_output.get("param"),
            **{f"state[{key!r}]": by_output.get(output) for output, key in op.state_outputs.items()}}
    for key in want:
        if key not in got:
            raise Mismatch(f"has no {key} for the complex parameter, where the real view has one")
        value, expected = got[key], want[key]
        if hasattr(expected, "shape") and hasattr(value, "shape") and value.shape != expected.shape:
            expected = expected.reshape(value.shape) if expected.numel() == value.numel() else expected
        if hasattr(expected, "shape") and expected.dim() and hasattr(value, "shape"):
            # complex arithmetic (SGD's add_(grad, alpha=-lr) on complex numbers, no view_as_real) rounds
            # otherwise than on pairs of reals: the same within what a correct implementation may be off by
            tolerance = tols.get(key) or tolerances.agreement(trial.dtype)
            compare_outputs({key: value}, {key: expected}, {key: tolerance}, against=against)
        elif to_numpy(value).tolist() != to_numpy(expected).tolist():
            raise Mismatch(f"{key} is {to_numpy(value).tolist()}, {against}: {to_numpy(expected).tolist()}")
