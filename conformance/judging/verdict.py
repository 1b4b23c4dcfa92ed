"""The three-way verdict: an implementation judged against the documented behaviour (golden values
and the NumPy reference) *and* against stock torch on the same inputs, device and dtype.

=================  ===========================  ===============================================
conforms to spec   agrees with stock torch      verdict
=================  ===========================  ===============================================
yes                (either)                     ``conforms``; ``improvement`` when torch does not
no                 yes, and torch misses too    ``same-as-torch``: xfail with torch's known
                                                divergence, or "torch itself disagrees with the
                                                spec" when none is recorded
no                 no                           ``differs``: failed, golden/torch/got side by side
=================  ===========================  ===============================================

A recorded divergence of stock torch that torch no longer shows is *stale*: the item still passes,
and the run says so, so that entries cannot rot across torch versions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np
import torch as _torch

from conformance.backends.base import Backend
from conformance.core.compare import Tolerance, compare_outputs, format_values
from conformance.core.tensors import to_numpy
from conformance.core.types import Mismatch, missing_kernel, RunContext, safe_text, Unsupported
from conformance.ops import OPS

if TYPE_CHECKING:  # annotations only: the judging and cases stages take any op record
    from conformance.ops.base import Op

SMALL = 64  # tensors up to this many elements are shown side by side in full


class Verdict(str, Enum):
    CONFORMS = "conforms"
    IMPROVEMENT = "improvement"
    SAME_AS_TORCH = "same-as-torch"
    DIFFERS = "differs"

    __str__ = str.__str__

    def __format__(self, format_spec: str) -> str:  # (str's: a verdict formats as its value)
        return str.__format__(self, format_spec)


class SameAsTorch(Exception):
    """The implementation misses the spec exactly as stock torch does: reported as xfail."""

    def __init__(self, reason: str, mismatch: Mismatch):
        super().__init__(reason)
        self.reason = reason
        self.mismatch = mismatch


@dataclass
class TorchRun:
    """Stock torch on the same inputs: its outputs, or what it raised, and whether it conforms."""

    outputs: dict[str, Any] | None = None
    error: BaseException | None = None
    failure: Mismatch | None = None  # how torch itself misses the spec (None: it conforms)
    stand_in: str | None = None  # why torch ran on cpu instead of the item's device (None: it ran there)

    def where(self) -> str:
        """"stock torch" with the stand-in said, for messages."""
        return f"stock torch on cpu ({self.stand_in})" if self.stand_in else "stock torch"

    @property
    def conforms(self) -> bool:
        return self.error is None and self.failure is None


@dataclass
class Judgement:
    """What one item's three-way comparison found; ``record`` goes into the results file."""

    verdict: Verdict
    torch: TorchRun | None
    record: dict[str, Any] = field(default_factory=dict)


class StockTorch(Backend):
    """Stock torch's implementation of each op, driven through the ops' candidate contracts: the
    second opinion a candidate is judged against."""

    name = "stock-torch"
    description = "torch's own implementation of the op (Op.torch_implementation)"

    def __init__(self):
        super().__init__()

    def implements(self, op: str) -> bool:
        return op in OPS and OPS[op].torch_implementation is not None

    def optimizer_class(self, op: str):
        implementation = OPS[op].torch_implementation if op in OPS else None
        return implementation if isinstance(implementation, type) and issubclass(implementation, _torch.optim.Optimizer) else None

    def run(self, op: str, inputs: Any, ctx: RunContext) -> dict[str, Any]:
        if not self.implements(op):
            raise Unsupported(f"stock torch has no single implementation of {op!r}")
        return OPS[op].run_candidate(OPS[op].torch_implementation, inputs, ctx)


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (torch's dispatcher errors run to dozens of lines)."""
    text = safe_text(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__  # a bare raise: its type


def run_stock_torch(op: Op, inputs: Any, ctx: RunContext,
                    check: Callable[[dict[str, Any]], None]) -> TorchRun | None:
    """Run ``op``'s stock torch implementation through its candidate contract and ``check`` it
    against the spec; None when the op has no single torch implementation.

    Where torch's implementation has no kernel on the item's device (sparse COO tensors on XLA),
    torch on cpu, same inputs and dtype, stands in: it is the behaviour the device's other
    backends are meant to match, and the run says so (``TorchRun.stand_in``).
    """
    implementation = op.torch_implementation
    if implementation is None:
        return None
    run = TorchRun()
    try:
        run.outputs = op.run_candidate(implementation, inputs, RunContext(ctx.device, ctx.dtype, {}))
    except Unsupported:
        return None
    except Exception as exc:  # noqa: BLE001 - torch raising is a fact about torch, reported with the item
        missing = missing_kernel(exc, ctx.device)
        if missing is None:
            run.error = exc
            return run
        run = TorchRun(stand_in=f"on {ctx.device} {missing}")
        try:
            run.outputs = op.run_candidate(implementation, inputs, RunContext("cpu", ctx.dtype, {}))
        except Unsupported:
            return None
        except Exception as cpu_exc:  # noqa: BLE001
            run.error = cpu_exc
            return run
    try:
        check(run.outputs)
    except Mismatch as mismatch:
        run.failure = mismatch
    return run


def distance(outputs: Mapping[str, Any], other: Mapping[str, Any]) -> float | None:
    """Largest absolute difference over the floating outputs both have (NaN where only one is NaN)."""
    worst = []
    for name, value in outputs.items():
        if name not in other:
            continue
        a = np.asarray(to_numpy(value), dtype=np.float64)
        b = np.asarray(to_numpy(other[name]), dtype=np.float64)
        if a.shape != b.shape:
            return float("inf")
        if not a.size:
            continue
        both_nan = np.isnan(a) & np.isnan(b)
        with np.errstate(invalid="ignore"):
            diff = np.where(both_nan | (a == b), 0.0, np.abs(a - b))
        worst.append(float(diff.max()))  # NaN propagates
    return float(np.max(worst)) if worst else None


def agrees(outputs: Mapping[str, Any], torch_outputs: Mapping[str, Any],
           tolerances: Mapping[str, Tolerance | None], names) -> bool:
    """Whether ``outputs`` equal torch's on ``names`` within ``tolerances`` (NaN equals NaN)."""
    try:
        compare_outputs(outputs, {n: torch_outputs[n] for n in names if n in torch_outputs}, tolerances,
                        against="stock torch")
    except Mismatch:
        return False
    return True


def _listed(value: Any) -> Any:
    array = np.asarray(to_numpy(value), dtype=np.float64)
    if array.size > SMALL:
        return None
    # NaN and +-inf stay floats: the results file writes them "NaN"/"Infinity"/"-Infinity" (to_jsonable)
    return [float(x) for x in array.reshape(-1)] if array.ndim else float(array)


def side_by_side(expected: Mapping[str, Any], torch_outputs: Mapping[str, Any] | None,
                 outputs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{output: {"expected", "torch", "got"}} for small outputs, for the record and the report."""
    table = {}
    for name, want in expected.items():
        if name not in outputs:
            continue
        got = _listed(outputs[name])
        if got is None:
            continue
        table[name] = {"expected": _listed(want),
                       "torch": _listed(torch_outputs[name]) if torch_outputs and name in torch_outputs else None,
                       "got": got}
    return table


def format_side_by_side(table: Mapping[str, Mapping[str, Any]], computed: Mapping[str, str] | None = None) -> str:
    """The table as a message's lines; an output in ``computed`` (output -> how: what the suite computes
    from a candidate's state, not what the candidate returns) says so on its ``got`` line."""
    lines = []
    for name, row in table.items():
        lines.append(f"  {name}:")
        for who in ("expected", "torch", "got"):
            how = (f"  (computed by the suite from the candidate's state: {computed[name]}; the candidate "
                   f"returns no {name})") if who == "got" and computed and name in computed else ""
            lines.append(f"    {who:<8} {format_values(row[who])}{how}")
    return "\n".join(lines)


def torch_opinion(attempt: Callable[[], Any]) -> TorchRun | None:
    """Stock torch's side of a property check: ``attempt()`` runs the check on stock torch (a
    generated property's check with the stock-torch backend) and raises how torch misses it. None
    when torch cannot run it (Unsupported)."""
    run = TorchRun()
    try:
        attempt()
    except Unsupported:
        return None
    except Mismatch as mismatch:
        run.failure = mismatch
    except Exception as exc:  # noqa: BLE001 - torch raising (or a known divergence of its own) misses too
        run.error = exc
    return run


def judge(failure: Mismatch | None, torch: TorchRun | None, same_as_torch: bool | Callable[[], bool],
          divergence_text: str | None) -> Judgement:
    """The three-way verdict -- the one judging core of spec items, generated examples and
    counterexample replays: classify an implementation's run from how it compares with the spec
    (``failure``: golden values, reference, invariants or property; None when it conforms) and
    with stock torch on the same inputs (``torch``: :func:`run_stock_torch` or
    :func:`torch_opinion`; None where there is no stock torch to ask).

    ``same_as_torch`` says whether the implementation's outputs are torch's (within
    :func:`conformance.core.tolerances.agreement`); a callable is asked only when both miss the spec (it may run
    both again). ``divergence_text`` is the recorded known divergence of torch that applies here.
    Raises :class:`SameAsTorch` (xfail) when the implementation misses the spec as torch does;
    returns the judgement otherwise (``differs``: the caller raises :func:`differs`).
    """
    record: dict[str, Any] = {}
    if failure is None:
        if torch is not None and not torch.conforms:
            verdict = Verdict.IMPROVEMENT
            record["improvement"] = "conforms where stock torch does not" + (
                f" (fixes torch's known divergence: {divergence_text})" if divergence_text else
                f": torch {_torch_miss(torch)}")
        else:
            verdict = Verdict.CONFORMS
        return Judgement(verdict, torch, record)
    if torch is not None and not torch.conforms and (same_as_torch() if callable(same_as_torch) else same_as_torch):
        if divergence_text:
            reason = f"same as torch{_stand_in(torch)}: {divergence_text}"
        else:
            reason = (f"same as torch{_stand_in(torch)}: stock torch itself disagrees with the spec here and no known divergence "
                      "is recorded for it -- the finding is torch's and the spec's, not this implementation's "
                      f"(torch {_torch_miss(torch)})")
        raise SameAsTorch(reason, failure)
    return Judgement(Verdict.DIFFERS, torch, record)


def _stand_in(torch: TorchRun) -> str:
    return f" (on cpu; {torch.stand_in})" if torch.stand_in else ""


def _torch_miss(torch: TorchRun) -> str:
    if torch.error is not None:
        return f"raised {first_line(torch.error)}"
    return "gives " + str(torch.failure).strip().splitlines()[0] if torch.failure is not None else "conforms"


def differs(failure: Mismatch, torch: TorchRun | None, *, table: Mapping[str, Mapping[str, Any]] | None = None,
            on: str = "inputs", torch_note: str | None = None, computed: Mapping[str, str] | None = None) -> Mismatch:
    """The failure of a ``differs`` verdict, as raised: the one place its message is built -- how
    the implementation misses the spec, what stock torch did on the same ``on`` (inputs/example;
    ``torch_note`` replaces the default account), and the values side by side (``table``; ``computed``:
    the outputs the suite computed from a candidate's state, :func:`format_side_by_side`)."""
    detail = ""
    if torch_note is not None:
        detail = f"\n  stock torch on the same {on}: {torch_note}"
    elif torch is not None:
        detail = (f"\n  {torch.where()} on the same {on}: " + ("conforms" if torch.conforms else
                  "also misses the spec, differently") + (f" (it raised {first_line(torch.error)})"
                                                          if torch.error else ""))
    if table:
        detail += "\n" + format_side_by_side(table, computed)
    return Mismatch(f"{failure}{detail}", failure.max_abs_error, failure.max_rel_error)
