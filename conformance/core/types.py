"""What ops, backends and the harness all use, kept below all of them: where an item runs
(:class:`RunContext`), how an implementation says it cannot run it (:class:`Unsupported`), how a
check says an output is wrong (:class:`Mismatch`) and how an op record declares a known mistake
(:class:`Mistake`; :mod:`conformance.core.diagnosis` tells which one a failure looks like)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Mapping

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # annotations only: types stays on the package's lowest level (tests/test_layout.py)
    from conformance.core.layouts import Layout, Placement


class Outcome(str, Enum):
    """One item's outcome (the meanings: conformance/run/outcomes.py); a str, so records and JSON carry
    the plain name and compare equal to it."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    UNSUPPORTED = "unsupported"
    XFAIL = "xfail"
    XPASS = "xpass"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


class Unsupported(Exception):
    """Raised by a backend or candidate that does not implement an op, dtype, device or input.

    The harness reports it as the outcome ``unsupported``: never a pass, a failure,
    or a silent fallback to another backend.
    """


class Mismatch(AssertionError):
    """A backend's output differs from what was expected: the outcome ``failed``."""

    def __init__(self, message: str, max_abs_error: float | None = None, max_rel_error: float | None = None):
        super().__init__(message)
        self.max_abs_error = max_abs_error
        self.max_rel_error = max_rel_error


class ExampleTimedOut(BaseException):
    """pytest-timeout's timeout fired inside one example of a generated search: carried past
    Hypothesis (which would replay the example, see it pass, and call the timeout a FlakyFailure) to
    the item, with the ``example`` that was running (None where the search cannot tell)."""

    def __init__(self, timeout: BaseException, example: Any = None, examples_run: int = 0):
        super().__init__(str(timeout))
        self.timeout, self.example, self.examples_run = timeout, example, examples_run


MISTAKE_DASH = "\u2014"


@dataclass(frozen=True)
class Mistake:
    """One known mistake in implementing an op.

    ``model(inputs)`` returns the outputs (NumPy, keyed like the op's reference) an implementation
    with this mistake gives on ``inputs``, or None where the mistake does not apply or changes
    nothing (a ``tight`` model is called as ``model(inputs, dtype_name)``). ``raises(inputs, error)`` says whether ``error``, raised on ``inputs`` where the
    reference returns a result, is this mistake (for mistakes that show as errors); ``control(inputs)``
    gives inputs without the trigger, on which an implementation with only this mistake returns (an
    implementation that raises there too raises on everything: not this mistake). ``tight``: the
    mistake is one of rounding (truncating stores, half-precision sums), so the model is matched
    bit for bit and told apart from the reference correctly rounded to the dtype, not within the
    item's tolerance. ``takes_dtype``: the model depends on the dtype (a hyperparameter rounded to
    it) and is called as ``model(inputs, dtype_name)`` too, but matched within the item's tolerance.

    When two mistakes' models both match a failure and give the same outputs on its example
    (within the item's tolerance), the example cannot tell them apart and the one listed first in
    the op's catalogue is named: list the commoner mistake first."""

    name: str
    explanation: str
    model: Callable[..., Mapping[str, Any] | None] | None = None  # (inputs) or, tight or takes_dtype, (inputs, dtype)
    raises: Callable[[Any, BaseException], bool] | None = None
    control: Callable[[Any], Any] | None = None
    tight: bool = False
    takes_dtype: bool = False

    @property
    def record(self) -> dict[str, str]:
        return {"name": self.name, "explanation": self.explanation}

    @property
    def line(self) -> str:
        return f"looks like: {self.name} {MISTAKE_DASH} {self.explanation}"


_NO_KERNEL = re.compile(r"Could not run '([\w:.]+)' with arguments from the '(\w+)' backend")


def missing_kernel(exc: BaseException, device: str) -> str | None:
    """A one-line account when ``exc`` is torch's dispatcher saying it has no kernel for the op on
    ``device`` (sparse COO on XLA: SparseXLA); None for any other error. On cpu a missing kernel
    would be a torch regression, so it is never excused as one."""
    found = _NO_KERNEL.search(str(exc)) if isinstance(exc, NotImplementedError) else None
    if device == "cpu" or found is None:
        return None
    return f"torch has no kernel for {found.group(1)} on the {found.group(2)} backend (NotImplementedError)"


_NO_DTYPE_KERNEL = re.compile(r'"(\w+)" not implemented for \'(\w+)\'')


def missing_dtype_kernel(exc: BaseException) -> str | None:
    """A one-line account when ``exc`` is torch saying a kernel has no implementation for the
    dtype (``"cadd_sparse" not implemented for 'Half'``: sparse adds in float16 on cpu); None for
    any other error."""
    found = _NO_DTYPE_KERNEL.search(str(exc)) if isinstance(exc, (NotImplementedError, RuntimeError)) else None
    if found is None:
        return None
    return f"torch's {found.group(1)} is not implemented for {found.group(2)} ({type(exc).__name__})"


@dataclass
class RunContext:
    """Where and how one item runs, and a place for backends to record extra facts.

    ``layouts``: the memory layout of each input of the example by its role (``param``, ``grad``,
    ``values``, ``indices``, ``mask``; absent: contiguous), which whatever turns the example into
    tensors applies through :meth:`place`; ``placements`` keeps where each went
    (:mod:`conformance.core.layouts`). ``linear_windows``: the roles whose contiguous tensor over the
    view's window of storage is handed over instead of the view (the model of a kernel that walks
    ``data_ptr()`` linearly)."""

    device: str
    dtype: torch.dtype
    record: dict[str, Any] = field(default_factory=dict)
    layouts: Mapping[str, Layout] = field(default_factory=dict)
    linear_windows: tuple[str, ...] = ()
    placements: list[Placement] = field(default_factory=list)

    def place(self, role: str, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` (contiguous, fresh) in the layout this example gives ``role``: itself when none."""
        from conformance.core.layouts import CONTIGUOUS, place  # (a level below would be one more for every module)

        layout = self.layouts.get(role)
        if layout is None or layout.kind == CONTIGUOUS or not layout.fits(tensor.dim()):
            return tensor  # (transposing a 1-D tensor, as t() does, or channels_last off 4-D: itself)
        placement = place(role, tensor, layout, linear_window=role in self.linear_windows)
        self.placements.append(placement)
        return placement.handed

    @property
    def torch_device(self) -> torch.device:
        from conformance.core.devices import torch_device  # lazy: types stays on the lowest level (see the imports)

        return torch_device(self.device)


def exception_text(exc: BaseException) -> str:
    """An exception as a message shows it: ``Type: text``, or ``Type`` alone when it has no text
    (``raise NotImplementedError``), never an empty string or a bare text with no type; a hostile
    ``__str__`` cannot make it raise (:func:`safe_text`)."""
    text = safe_text(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def safe_text(value: Any) -> str:
    """``str(value)`` of a foreign object, never raising: a hostile ``__str__`` (raising, or
    returning a non-string) gets its type's name and what went wrong."""
    try:
        text = str(value)
        if isinstance(text, str):
            return text
        raise TypeError(f"__str__ returned {type(text).__name__}")
    except Exception as exc:  # noqa: BLE001
        try:
            problem = f"{type(exc).__name__}: {exc}"
        except Exception:  # noqa: BLE001
            problem = type(exc).__name__
        return f"<{type(value).__name__} object; str() failed: {problem}>"
