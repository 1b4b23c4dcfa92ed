"""``mean-*`` backends: the masked-mean idioms of seed document 004 (PyTorch/XLA masked
computation), each a backend of its own implementing ``masked_mean`` and
``masked_mean_compiles`` only (``mean-where``, ``mean-select``, ...).

Every approach is a function ``(values, mask) -> (value, grad)``: ``value`` is
the mean of ``values`` where ``mask`` is True, ``grad`` is d(value)/d(values)
obtained through autograd *in that approach's own idiom*. Inputs may live on
any device (cpu, cuda, xla); outputs stay on that device and, on XLA, are lazy
until :func:`conformance.core.xla_support.sync`.

Spec semantics: value = mean(values[mask]); grad = mask / count(mask), zero at
every invalid entry; values under the mask (NaN/inf included) affect neither.

Static-shape approaches (every intermediate has the input's shape):
``multiply`` (the document's baseline), ``where``, ``hook``, ``zero-grad``.
Dynamic-shape approaches (output size depends on the mask's count):
``select`` and ``function`` (the document's ``MaskedMean`` uses
``masked_select`` in its forward). On XLA a dynamic shape means one graph per
distinct count of selected elements.

Known divergence, by design of the idiom: ``multiply``, ``hook`` and
``zero-grad`` compute the value as ``sum(values * mask) / count``; a NaN or inf
under the mask gives NaN on cpu and cuda (NaN*0 = NaN, inf*0 = NaN). Their
gradient is still right: d(values*mask)/d(values) = mask. On XLA (observed with
torch_xla 2.9, PJRT CPU) the compiler rewrites ``x * convert(mask)`` into a
select, so there the NaN does *not* come through and the value meets the spec:
the same idiom gives different answers on different devices.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np
import torch

from conformance.backends.base import Backend
from conformance.ops.masked_mean import MaskedMeanInputs, masked_mean_reference
from conformance.ops.masked_mean_compiles import run_series
from conformance.core.tensors import to_torch
from conformance.core import xla_support
from conformance.core.divergences import Divergence, register

Approach = Callable[[torch.Tensor, torch.Tensor], "tuple[torch.Tensor, torch.Tensor]"]


def _leaf(values: torch.Tensor) -> torch.Tensor:
    return values.detach().clone().requires_grad_(True)


def _multiply_loss(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # The document's "traditional" masked mean: zero invalid positions by
    # multiplication, divide the sum by the number of valid entries.
    return (x * mask).sum() / mask.sum()


def mean_multiply(values: torch.Tensor, mask: torch.Tensor):
    x = _leaf(values)
    value = _multiply_loss(x, mask)
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


def mean_where(values: torch.Tensor, mask: torch.Tensor):
    x = _leaf(values)
    value = torch.where(mask, x, torch.zeros_like(x)).sum() / mask.sum()
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


def mean_select(values: torch.Tensor, mask: torch.Tensor):
    x = _leaf(values)
    value = torch.masked_select(x, mask).mean()
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


class MaskedMean(torch.autograd.Function):
    """The document's custom autograd.Function, as written there."""

    @staticmethod
    def forward(ctx, input_tensor, is_valid):
        ctx.save_for_backward(is_valid)
        valid = torch.masked_select(input_tensor, is_valid)
        return valid.mean()

    @staticmethod
    def backward(ctx, grad_output):
        (is_valid,) = ctx.saved_tensors
        grad_input = grad_output * is_valid / is_valid.sum()
        return grad_input, None


def mean_function(values: torch.Tensor, mask: torch.Tensor):
    x = _leaf(values)
    value = MaskedMean.apply(x, mask)
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


def mean_hook(values: torch.Tensor, mask: torch.Tensor):
    # The document's "best" remedy: leave the forward alone and mask the
    # gradient with a hook on the input.
    x = _leaf(values)
    handle = x.register_hook(lambda g: g * mask)
    try:
        value = _multiply_loss(x, mask)
        value.backward()
    finally:
        handle.remove()
    return value.detach(), x.grad


def mean_zero_grad(values: torch.Tensor, mask: torch.Tensor):
    # The document's first remedy: backward, then zero invalid gradients by hand.
    x = _leaf(values)
    value = _multiply_loss(x, mask)
    value.backward()
    assert x.grad is not None  # (x is a leaf that requires grad: backward set it)
    x.grad = x.grad * mask
    return value.detach(), x.grad


@dataclasses.dataclass(frozen=True)
class ApproachInfo:
    name: str
    fn: Approach
    static_shape: bool
    description: str
    # Inputs on which this idiom is known not to meet the spec, and why.
    known_divergence: str | None = None


_NAN_DIVERGENCE = (
    "value is NaN when a NaN or inf sits under the mask (cpu, cuda): the idiom "
    "multiplies invalid entries by zero and NaN*0 = inf*0 = NaN; the gradient is "
    "unaffected. On xla the compiler turns x*convert(mask) into a select and the "
    "value is right"
)

APPROACHES: Mapping[str, ApproachInfo] = MappingProxyType({
    info.name: info
    for info in (
        ApproachInfo("multiply", mean_multiply, True,
                     "sum(values * mask) / mask.sum() - the document's baseline",
                     _NAN_DIVERGENCE),
        ApproachInfo("where", mean_where, True,
                     "where(mask, values, 0).sum() / mask.sum()"),
        ApproachInfo("select", mean_select, False,
                     "masked_select(values, mask).mean() - dynamic shape"),
        ApproachInfo("function", mean_function, False,
                     "custom autograd.Function MaskedMean (masked_select forward, "
                     "grad_output * mask / mask.sum() backward)"),
        ApproachInfo("hook", mean_hook, True,
                     "multiply idiom with values.register_hook(lambda g: g * mask)",
                     _NAN_DIVERGENCE),
        ApproachInfo("zero-grad", mean_zero_grad, True,
                     "multiply idiom, backward(), then grad = grad * mask",
                     _NAN_DIVERGENCE),
    )
})


def idiom_backend(approach: str) -> str:
    """The backend's name of one of :data:`APPROACHES` (``"multiply"`` -> ``"mean-multiply"``); KeyError for
    another name, so a registration cannot name an idiom that is not there."""
    return f"mean-{APPROACHES[approach].name}"


def run_approach(name: str, values: torch.Tensor, mask: torch.Tensor,
                 device: torch.device | str = "cpu"):
    """Run approach ``name`` on ``device`` outside the harness; return (value, grad) on the CPU.

    On XLA the whole forward+backward is one lazy graph, executed by a single
    sync before the results are copied back.
    """
    info = APPROACHES[name]
    device = torch.device(device)
    v = values.to(device)
    m = mask.to(device=device, dtype=torch.bool)
    value, grad = info.fn(v, m)
    if xla_support.is_xla(device):
        xla_support.sync()
    return value.detach().cpu(), grad.detach().cpu()


def reference(values: torch.Tensor, mask: torch.Tensor):
    """The spec's value and gradient, computed in float64 without autograd."""
    v = values.detach().to(torch.float64).cpu()
    m = mask.to(torch.bool).cpu()
    count = int(m.sum())
    value = v[m].sum() / count if count else torch.tensor(float("nan"), dtype=torch.float64)
    grad = m.to(torch.float64) / count if count else torch.zeros_like(v)
    return value, grad


@dataclasses.dataclass
class CompileExperiment:
    """Compilations per mask when one approach runs over several masks on XLA."""

    approach: str
    counts: list[int]             # number of selected elements of each mask
    compiles: list[int]           # UncachedCompile delta of each run
    compile_time_samples: list[int]
    seconds: list[float]          # wall time of each run, sync and copy-back included

    @property
    def warmup_compiles(self) -> int:
        return self.compiles[0]

    @property
    def after_warmup_compiles(self) -> int:
        return sum(self.compiles[1:])

    @property
    def total_compiles(self) -> int:
        return sum(self.compiles)

    @property
    def after_warmup_seconds(self) -> float:
        return sum(self.seconds[1:])

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.update(total_compiles=self.total_compiles,
                 warmup_compiles=self.warmup_compiles,
                 after_warmup_compiles=self.after_warmup_compiles,
                 after_warmup_seconds=round(self.after_warmup_seconds, 4),
                 distinct_counts=len(set(self.counts)))
        return d


def masks_with_counts(shape: tuple[int, ...], counts: list[int], seed: int = 0) -> list[torch.Tensor]:
    """One random boolean mask of ``shape`` per entry of ``counts``, with exactly
    that many True entries."""
    numel = 1
    for s in shape:
        numel *= s
    g = torch.Generator().manual_seed(seed)
    masks = []
    for c in counts:
        if not 0 <= c <= numel:
            raise ValueError(f"count {c} out of range for shape {shape}")
        flat = torch.zeros(numel, dtype=torch.bool)
        flat[torch.randperm(numel, generator=g)[:c]] = True
        masks.append(flat.reshape(shape))
    return masks


def distinct_count_masks(shape: tuple[int, ...], n_masks: int, seed: int = 0) -> list[torch.Tensor]:
    """``n_masks`` random masks of ``shape``, each with a different number of True
    entries (between 1 and numel), so a dynamic-shape idiom sees n distinct shapes."""
    numel = 1
    for s in shape:
        numel *= s
    if n_masks > numel:
        raise ValueError(f"need numel >= n_masks to get distinct counts ({numel} < {n_masks})")
    g = torch.Generator().manual_seed(seed)
    counts = (torch.randperm(numel, generator=g)[:n_masks] + 1).tolist()
    return masks_with_counts(shape, counts, seed)


def compile_experiment(name: str, masks: list[torch.Tensor], values: torch.Tensor,
                       device: torch.device | str | None = None) -> CompileExperiment:
    """Run approach ``name`` once per mask on the XLA device, counting compilations.

    Values are fresh per run (same shape, different data) so that only the
    mask's structure - not constant folding of data - could change the graph.
    """
    device = torch.device(device) if device is not None else xla_support.xla_device()

    compiles, samples, counts, seconds = [], [], [], []
    for i, mask in enumerate(masks):
        vals = values + i  # same shape, different data
        t0 = time.perf_counter()
        with xla_support.count_compiles() as cc:
            run_approach(name, vals, mask, device)
        seconds.append(time.perf_counter() - t0)
        compiles.append(cc.uncached_compile)
        samples.append(cc.compile_time_samples)
        counts.append(int(mask.sum()))
    return CompileExperiment(name, counts, compiles, samples, seconds)


# ---------------------------------------------------------------- the backends

def _masked_mean_runner(info: ApproachInfo):
    def run(inputs, ctx):
        values = ctx.place("values", to_torch(inputs.values, ctx.dtype, ctx.torch_device))
        mask = ctx.place("mask", to_torch(inputs.mask, None, ctx.torch_device))
        value, grad = info.fn(values, mask)
        return {"value": value.reshape(()), "grad": grad}

    return run


# ---------------------------------------------------------------- their known divergences, modelled

def multiply_model(inputs: MaskedMeanInputs) -> dict[str, np.ndarray]:
    count = inputs.mask.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.sum(inputs.values * inputs.mask) / count
        grad = inputs.mask / count * inputs.mask
    return {"value": np.float64(value), "grad": grad}


def function_model(inputs: MaskedMeanInputs) -> dict[str, np.ndarray]:
    count = inputs.mask.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        grad = inputs.mask / count
    return {"value": masked_mean_reference(inputs)["value"], "grad": grad}


# (on xla the compiler rewrites x * convert(mask) into a select, and the result is right)
MULTIPLY_LETS_NAN_THROUGH = register(Divergence(
    "multiply-lets-nan-through",
    "the note's multiply idiom, sum(values * mask) / count, lets a NaN or inf under the mask through "
    "(NaN * 0 = inf * 0 = NaN), and with no valid entry its gradient is mask * (1 / 0) = 0 * inf = NaN; "
    "masking the gradient afterwards (hook, zero-grad) multiplies NaN by 0 again",
    None, ops=("masked_mean",), backends=tuple(map(idiom_backend, ("multiply", "hook", "zero-grad"))),
    devices=("cpu", "cuda"), model=multiply_model,
))
FUNCTION_NAN_GRAD = register(Divergence(
    "masked-mean-function-nan-grad",
    "the note's MaskedMean backward, grad_output * is_valid / is_valid.sum(), is 0 / 0 = NaN at every entry "
    "when no entry is valid",
    None, ops=("masked_mean",), backends=(idiom_backend("function"),), devices=("cpu", "cuda"), model=function_model,
))


class IdiomBackend(Backend):
    """One masked-mean idiom; items only for the ops it implements."""

    lists_unimplemented_ops = False

    def __init__(self, info: ApproachInfo):
        self.name = idiom_backend(info.name)
        self.description = info.description
        self.info = info
        masked_mean = _masked_mean_runner(info)
        super().__init__({
            "masked_mean": masked_mean,
            "masked_mean_compiles": lambda inputs, ctx: run_series(masked_mean, inputs, ctx),
        })


BACKENDS = tuple(IdiomBackend(info) for info in APPROACHES.values())


def main(argv: list[str] | None = None) -> int:
    """Print the compile experiment for every approach on the XLA device:
    ``python -m conformance.backends.masked_mean_idioms [--masks N] [--shape R C]``.
    Each approach runs in a fresh process so graph caches don't carry over."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--masks", type=int, default=10)
    ap.add_argument("--shape", type=int, nargs="+", default=[64, 64])
    ap.add_argument("--approach", help="run just this one, in this process")
    args = ap.parse_args(argv)
    if args.approach:
        masks = distinct_count_masks(tuple(args.shape), args.masks, seed=0)
        values = torch.randn(*args.shape, generator=torch.Generator().manual_seed(1))
        run_approach(args.approach, values, masks[0], xla_support.xla_device())  # runtime start-up
        print(json.dumps(compile_experiment(args.approach, masks, values).as_dict()))
        return 0
    reason = xla_support.xla_unavailable_reason()
    if reason:
        print(f"XLA unavailable: {reason}", file=sys.stderr)
        return 2
    for name in APPROACHES:
        cmd = [sys.executable, "-m", "conformance.backends.masked_mean_idioms", "--approach", name, "--masks", str(args.masks),
               "--shape", *map(str, args.shape)]
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        d = json.loads(res.stdout.strip().splitlines()[-1])
        print(f"{name:10s} compiles={d['compiles']} after_warmup={d['after_warmup_compiles']} "
              f"distinct_counts={d['distinct_counts']} "
              f"after_warmup_seconds={d['after_warmup_seconds']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
