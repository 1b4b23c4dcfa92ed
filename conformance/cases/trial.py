"""One property on one backend, device and dtype: the :class:`Trial` that runs a backend and
compares its outputs, the tolerances it compares them within, and the :class:`Property` a trial
runs.

Tolerances come from :mod:`conformance.core.tolerances` (the op record's declared error bounds:
they scale with the work done -- the dtype's unit roundoff, the number of steps and duplicates, the
magnitudes involved -- and with how far the same formulas evaluated in the dtype land from the
float64 reference). An output outside them is checked against models of
known divergences (:mod:`conformance.core.divergences`) -- stock torch's half-precision arithmetic
(:mod:`conformance.cases.lowprec`) and particular backends' documented idioms and rounding modes;
when it matches one, the example is recorded as that divergence with its reason
(:class:`DivergenceObserved`) -- never a silent pass and never a failure -- and the search goes on.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, cast

import numpy as np
from hypothesis import strategies as st

from conformance.backends.base import Backend
from conformance.cases import lowprec
from conformance.core import tolerances
from conformance.core.compare import assert_bits_equal, compare_outputs
from conformance.core.divergences import STOCK_TORCH, ConditionalDivergence, Divergence, lookup
from conformance.core.tensors import torch_dtype
from conformance.core.types import Mismatch, RunContext, Unsupported

if TYPE_CHECKING:  # annotations only: the judging and cases stages take any op record
    from conformance.ops.base import Op
    from conformance.ops.optimizers.base import OptimizerOp

# ---------------------------------------------------------------- outcomes of one example

class DivergenceObserved(Exception):
    """An example on which the backend matched stock torch's documented low-precision behaviour
    (see :mod:`conformance.cases.lowprec`) but not the float64 reference."""

    def __init__(self, divergence: Divergence, detail: str):
        super().__init__(f"{divergence.reason} ({detail})")
        self.divergence = divergence
        self.detail = detail


@dataclass
class Trial:
    """One property on one backend, device and dtype: runs the backend and compares outputs."""

    op: Op
    backend: Backend
    device: str
    dtype: str

    @property
    def optimizer(self) -> OptimizerOp:
        """The op, typed as the optimizer record it is in an optimizer's property (what OptimizerOp declares)."""
        return cast("OptimizerOp", self.op)

    def run(self, inputs: Any) -> dict[str, Any]:
        return self.backend.run(self.op.name, inputs, self.context())

    def context(self, layouts: dict | None = None, linear_windows: tuple[str, ...] = ()) -> RunContext:
        """A fresh RunContext of this trial's device and dtype, each input in the layout ``layouts``
        gives its role (conformance.core.layouts)."""
        return RunContext(self.device, torch_dtype(self.dtype), layouts=dict(layouts or {}),
                          linear_windows=linear_windows)

    def reference(self, inputs: Any) -> dict[str, Any]:
        return self.op.reference(inputs)

    def tolerances(self, inputs: Any) -> dict[str, Any]:
        return tolerances.generated(self.op, inputs, self.dtype)

    def emulate(self, inputs: Any) -> dict[str, np.ndarray]:
        """Stock torch's result in this dtype, the way torch rounds (:func:`lowprec.emulate`)."""
        return lowprec.emulate(self.op, inputs, self.dtype)

    def excuse(self, runs: list[tuple[Any, dict]], mismatch: Mismatch) -> None:
        """Raise DivergenceObserved when every ``(inputs, outputs)`` run matches one and the same
        known divergence of this backend; return (and let ``mismatch`` stand) otherwise."""
        found = None
        for inputs, outputs in runs:
            divergence = self.known_divergence(inputs, outputs, self.tolerances(inputs))
            if divergence is None or (found is not None and divergence != found):
                return
            found = divergence
        if found is not None:
            raise DivergenceObserved(found, str(mismatch).splitlines()[0]) from None

    def compare(self, outputs: dict, expected: dict, tols: dict, inputs: Any, against: str,
                model: Callable[[], dict] | None = None) -> None:
        """compare_outputs; on a Mismatch, ask whether a known divergence explains it -- this
        backend's documented idiom (a registered divergence with a model) or stock torch's
        low-precision arithmetic (``model`` gives torch's result in this dtype) -- before failing."""
        try:
            compare_outputs(outputs, expected, tols, against=against)
        except Mismatch as mismatch:
            if self.backend.judged_against_torch:
                raise  # a candidate is excused only by being the same as stock torch (same_as_torch)
            divergence = self.known_divergence(inputs, outputs, tols, names=list(expected), lowprec_model=model)
            if divergence is None:
                raise
            raise DivergenceObserved(divergence, str(mismatch).splitlines()[0]) from None

    def known_divergence(self, inputs: Any, outputs: dict, tols: dict, names: list[str] | None = None,
                         lowprec_model: Callable[[], dict] | None = None) -> Divergence | None:
        """The known divergence whose model these outputs match (on ``names``), or None."""
        if self.backend.is_oracle:
            return None
        models: list[tuple[Divergence, Callable[[], dict]]] = [
            (entry, functools.partial(entry.model, inputs)) for entry in self.idioms() if entry.model is not None]
        half = lowprec.explain(self.op, inputs, self.dtype)
        if half is not None:
            models.append((half, lowprec_model or (lambda: lowprec.emulate(self.op, inputs, self.dtype))))
        for divergence, make_model in models:
            modelled = make_model()
            wanted = {k: v for k, v in modelled.items() if names is None or k in names}
            try:
                compare_outputs(outputs, wanted, tols, against=f"the model of {divergence.key}")
            except Mismatch:
                continue
            return divergence
        return None

    def assert_same_runs(self, name: str, got, want, against: str) -> None:
        """Two runs of this backend agree: bit for bit on cpu; within the dtype's agreement tolerance
        (:func:`conformance.core.tolerances.agreement`) on other devices, whose kernels may sum in a different order
        from run to run (atomics)."""
        if self.device == "cpu":
            assert_bits_equal(name, got, want, None, against=against)
            return
        compare_outputs({name: got}, {name: want}, {name: tolerances.agreement(self.dtype)}, against=against)

    def excuse_conditional(self, prop: str, inputs: Any, detail: str, kind: str,
                           error: BaseException | None = None) -> None:
        """Raise DivergenceObserved when a registered ConditionalDivergence of this backend and property
        ``prop`` (of the ``kind``: a mismatch, or an error: then ``error``, the exception it pins) is
        triggered by the example; a candidate is excused only by the three-way verdict."""
        if self.backend.judged_against_torch:
            return
        for entry in lookup(op=self.op.name, backend=self.backend.name, device=self.device, dtype=self.dtype,
                            property=prop):
            if not (isinstance(entry, ConditionalDivergence) and entry.kind == kind):
                continue
            if kind == "error" and (error is None or not entry.error_matches(error)):
                continue  # another error than the one it pins: the suite's own, or a new one of torch's
            if entry.triggered is not None and entry.triggered(inputs):
                raise DivergenceObserved(entry, detail) from None

    def idioms(self) -> list[Divergence]:
        """The registered divergences of this backend's own idioms here, with their models."""
        found = lookup(op=self.op.name, backend=self.backend.name, device=self.device, dtype=self.dtype)
        return [entry for entry in found if entry.model is not None and not entry.is_torch_behaviour]


SAME_AS_TORCH = Divergence(
    "same-as-torch",
    "the result is the same as stock torch's on the same inputs, and torch itself misses the property here",
    None, behaviour=STOCK_TORCH,
)


def same_as_torch(divergence: Divergence) -> Divergence:
    """``divergence`` as a candidate shows it: the same as stock torch."""
    return replace(divergence, reason=f"same as torch: {divergence.reason}")


def by_model(divergence: Divergence, how: str | None = None) -> Divergence:
    """``divergence`` of stock torch's as a candidate shows it, judged by its model (``how``: which one),
    not by torch's run on the one example: the same as torch within what the divergence allows."""
    model = f" ({how})" if how else ""
    return replace(divergence, reason=f"same as torch by the model of {divergence.key}{model}: {divergence.reason}")


def _single_case(example: Any, dtype: str) -> list[tuple[str, Any]]:
    return [("", example)]


@dataclass(frozen=True)
class Property:
    """A generated property: ``check(trial, example)`` raises Mismatch where the backend misses it.

    The op records declare their properties (``Op.properties``: ``GeneratedProperty``);
    :func:`conformance.cases.properties.property_of` binds each declaration to its check. A generic
    check (:data:`conformance.cases.properties.CHECKS`) is a Property of no op yet (:func:`unbound`):
    its check and what the check needs (``to_cases``, ``observe``, backends, dtypes); binding it
    to a declaration fills in the op, name, summary, strategy and explicit examples."""

    op: str
    name: str
    summary: str
    strategy: Callable[[str], st.SearchStrategy] | None  # None: not bound to an op yet
    check: Callable[[Trial, Any], None]
    skip_backends: tuple[str, ...] = ()
    skips_oracle: bool = False  # the oracle (Backend.is_oracle) gets no items: the check compares with it
    dtypes: tuple[str, ...] | None = None  # None: every float dtype
    # dtype -> examples run before Hypothesis draws any (its explicit examples)
    examples: Callable[[str], list] = field(default=lambda dtype: [])
    # the op inputs an example stands for, (label, inputs) per case (two for the pairwise properties)
    to_cases: Callable[[Any, str], list[tuple[str, Any]]] = _single_case
    needs_optimizer_object: bool = False  # only backends with Backend.optimizer_class get items
    candidates_only: bool = False  # only backends judged against torch (candidates) get items
    needs_grad_scaling: bool = False  # only backends that take GradScaler's grad_scale/found_inf get items
    max_examples: int | None = None  # at most this many drawn examples per item; None: the run's
    # False where the property judges a refusal, not values: a failing example has no result to match
    # against the op's catalogue of mistakes (conformance.core.diagnosis), and no "looks like" is named
    judges_values: bool = True
    # what the three-way verdict compares between a candidate and stock torch when both miss the
    # property (None: the outputs of each of the example's cases, run alone)
    observe: Callable[[Trial, Any], dict[str, Any]] | None = None
    # the layouts an example hands its inputs over in, by role (conformance.core.layouts): what a counterexample
    # spec's cases declare under ``layouts:`` (None: every input contiguous)
    layouts_of: Callable[[Any], dict[str, Any]] | None = None

    @property
    def id(self) -> str:
        return f"{self.op}-{self.name}"

    def accepts(self, backend: Backend) -> bool:
        """Whether ``backend`` gets items of this property, by what it is (``skip_backends`` name
        the others): the oracle, a backend without an optimizer object or a twin of another's
        (``Backend.optimizer_object_twin``), one not judged against torch."""
        if self.skips_oracle and backend.is_oracle:
            return False
        if backend.generated_properties is not None and self.name not in backend.generated_properties:
            return False
        if self.needs_optimizer_object and (not _has_optimizer_class(backend, self.op) or backend.optimizer_object_twin):
            return False
        if self.needs_grad_scaling and not backend.takes_grad_scaling:
            return False
        return not self.candidates_only or backend.judged_against_torch


def _has_optimizer_class(backend: Backend, op: str) -> bool:
    """Whether ``backend`` has an optimizer class of ``op``; one this torch lacks what it needs for (the kernels'
    before torch 2.5: NotInTorch, an Unsupported) still has it, so that its items say so one by one at run
    time rather than collection failing (torch 2.1.2's `pytest specs` did, 2026-11-29)."""
    try:
        return backend.optimizer_class(op) is not None
    except Unsupported:
        return True


def unbound(check: Callable[[Trial, Any], None], **needs: Any) -> Property:
    """A check as a property of no op yet (a generic check; ``needs``: Property's fields such as
    ``to_cases``, ``skip_backends``, ``skips_oracle``, ``dtypes``, ``observe``)."""
    return Property("", "", "", None, check, **needs)
