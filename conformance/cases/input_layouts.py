"""The property layout-invariant (the layout dimension of the input space, :mod:`conformance.core.layouts`):
the same inputs handed over as non-contiguous views give the result of contiguous copies, and no byte
of the storage around a view changes."""

from __future__ import annotations

import copy
from typing import Any

import torch

from conformance.cases.trial import DivergenceObserved, Trial
from conformance.core.compare import assert_bits_equal, compare_outputs
from conformance.core.divergences import Divergence, LayoutDivergence, lookup
from conformance.core import tolerances
from conformance.core.layouts import describe, in_storage_order, outside_changed, torch_equal_bits
from conformance.core.types import Mismatch, RunContext, Unsupported, exception_text
from conformance.ops.base import LAYOUT_INVARIANT

def _placed(placements: list) -> str:
    """The layouts an example's tensors were actually placed in: ``param strided(offset=1, step=2)``."""
    seen: dict[str, str] = {}
    for placement in placements:
        seen.setdefault(placement.role, str(placement.layout))
    return ", ".join(f"{role} {layout}" for role, layout in seen.items())


def layout_cases(example: tuple[Any, dict], dtype: str) -> list[tuple[str, Any]]:
    inputs, layouts = example
    return [(f"layouts: {describe(layouts)}", inputs)]


def check_layout_invariant(trial: Trial, example: tuple[Any, dict]) -> None:
    """The same inputs handed over in the drawn layouts (views into larger storages, transposed,
    channels_last: :mod:`conformance.core.layouts`) give the result of contiguous copies -- bit for
    bit on cpu, but for the outputs the op declares reordered (a reduction over strides:
    ``Op.layout_reordered_outputs``), which agree within the agreement tolerance -- and no byte of
    the storage around a view changes. A failure names the layouts; a registered
    :class:`~conformance.core.divergences.LayoutDivergence` that reproduces the miss bit for bit
    (the kernel walks ``data_ptr()`` linearly) is that divergence."""
    inputs, layouts = example
    op, backend = trial.op, trial.backend
    ctx = trial.context(layouts)
    try:
        plain = trial.run(copy.deepcopy(inputs))
    except Unsupported:
        raise
    except Exception as refusal:  # noqa: BLE001 - contiguous copies are refused: the views must be refused alike
        try:
            backend.run(op.name, copy.deepcopy(inputs), ctx)
        except Unsupported:
            raise
        except Exception as other:  # noqa: BLE001
            if type(other) is type(refusal):
                return
            raise Mismatch(f"layout {_placed(ctx.placements) or describe(layouts)}: raises {exception_text(other)}, "
                           f"where contiguous copies of the same inputs raise {exception_text(refusal)}") from other
        raise Mismatch(f"layout {_placed(ctx.placements) or describe(layouts)}: returns a result, where contiguous "
                       f"copies of the same inputs raise {exception_text(refusal)}") from None
    try:
        placed = backend.run(op.name, copy.deepcopy(inputs), ctx)
    except Unsupported:
        raise
    except Exception as exc:  # noqa: BLE001 - a view refused where the contiguous copy runs: torch's ops take views
        raise Mismatch(f"layout {_placed(ctx.placements)}: raises {exception_text(exc)} on non-contiguous inputs, "
                       "where contiguous copies of the same inputs run") from exc
    if not ctx.placements:
        return  # every drawn layout is contiguous, or fits none of these tensors: nothing to compare
    where = _placed(ctx.placements)
    try:
        _assert_same_outputs(trial, placed, plain, against="the same backend on contiguous copies of the inputs")
        for placement in ctx.placements:
            problem = outside_changed(placement)
            if problem is not None:
                raise Mismatch(f"wrote outside the view it was handed: {problem}")
    except Mismatch as mismatch:
        divergence = _layout_divergence(trial, inputs, layouts, ctx, placed)
        if divergence is not None:
            raise DivergenceObserved(divergence, f"layout {where}: {str(mismatch).splitlines()[0]}") from None
        raise Mismatch(f"layout {where}: {mismatch}", mismatch.max_abs_error, mismatch.max_rel_error) from None


def _assert_same_outputs(trial: Trial, got: dict, want: dict, against: str) -> None:
    missing = sorted(set(want) - set(got))
    if missing:
        raise Mismatch(f"did not produce {', '.join(missing)}")
    for name, expected in want.items():
        value = got[name]
        if not (hasattr(value, "shape") or hasattr(expected, "shape")):
            if value != expected:
                raise Mismatch(f"{name} is {value!r}, {against}: {expected!r}")
        elif name in trial.op.layout_reordered_outputs or trial.device != "cpu":
            compare_outputs({name: value}, {name: expected}, {name: tolerances.agreement(trial.dtype)}, against=against)
        else:
            assert_bits_equal(name, value, expected, None, against=against)


def _layout_divergence(trial: Trial, inputs: Any, layouts: dict, ctx: RunContext, placed: dict) -> Divergence | None:
    """The registered LayoutDivergence of this backend here that reproduces the run bit for bit, or None.
    A candidate is excused only by the three-way verdict (stock torch's default step has the property)."""
    if trial.backend.judged_against_torch:
        return None
    for entry in lookup(op=trial.op.name, backend=trial.backend.name, device=trial.device, dtype=trial.dtype,
                        property=LAYOUT_INVARIANT):
        if not isinstance(entry, LayoutDivergence):
            continue
        if entry.triggered is not None:
            if entry.triggered(inputs, ctx.placements):
                return entry
            continue
        if not any(p.role in entry.walks for p in ctx.placements):
            continue
        model = trial.context(layouts, linear_windows=entry.walks)
        try:
            modelled = trial.backend.run(trial.op.name, copy.deepcopy(inputs), model)
        except Exception:  # noqa: BLE001 - the model does not run here: it does not explain the miss
            continue
        derived = set(trial.op.root_outputs)  # read from a state in index order (Adagrad's std): not walked
        if _same_storages(ctx.placements, model.placements) and _same_in_storage_order(
                {k: v for k, v in placed.items() if k not in derived}, modelled, ctx):
            return entry
    return None


def _same_storages(ours: list, theirs: list) -> bool:
    return len(ours) == len(theirs) and all(
        a.role == b.role and torch_equal_bits(a.storage, b.storage) for a, b in zip(ours, theirs))


def _same_in_storage_order(placed: dict, modelled: dict, ctx: RunContext) -> bool:
    """Each output that is not a view into a placed storage (those are compared whole) equal in storage
    order: a state tensor created like a transposed parameter is walked in its storage's order too."""
    storages = {p.storage.untyped_storage().data_ptr() for p in ctx.placements}
    for name, value in placed.items():
        other = modelled.get(name)
        if not hasattr(value, "shape"):
            if value != other:
                return False
            continue
        if other is None or not hasattr(other, "shape"):
            return False
        if value.layout == other.layout == torch.strided and value.untyped_storage().data_ptr() in storages:
            continue
        if not torch_equal_bits(in_storage_order(value), in_storage_order(other)):
            return False
    return True
