"""The configuration dimension of the optimizers' input space: each optimizer declares its configuration
space as data (:class:`ConfigurationSpace`: every hyperparameter with the values worth testing, the step
kinds), and a covering array over it -- every pair of settings, every triple of hyperparameter values, in
at least one explicit example -- is built once from the declaration (:func:`covering_rows`, a greedy
generator) and run on every backend and candidate before Hypothesis draws further configurations from the
same space. A configuration torch refuses (the op's NumPy reference raises torch's documented error) is
never an example here: rejects-invalid judges refusals. A failure names its configuration
(``weight_decay=0.1, maximize=True, dense steps``)."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Protocol, TypeGuard

import numpy as np
from hypothesis import strategies as st

from conformance.core.tensors import CooArray
from conformance.ops.optimizers.inputs import OptimizerInputs

CONFIGURATIONS = "configurations"  # the property (an optimizer record that declares a space gets it)
STEP_KINDS = ("sparse", "dense", "mixed", "empty")
STEPS = "steps"  # the step kind's factor in a row


@dataclass(frozen=True)
class ConfigurationSpace:
    """An optimizer's configuration space: each hyperparameter with its values worth testing (its first
    value is torch's default, toward which a drawn configuration shrinks), and the kinds of gradient
    trajectory it takes (:data:`STEP_KINDS`: sparse steps, dense steps, dense and sparse mixed, an empty
    sparse gradient first). Validated at construction: an unknown step kind or an empty value list raises."""

    hyperparameters: Mapping[str, tuple]
    step_kinds: tuple[str, ...] = STEP_KINDS

    def __post_init__(self) -> None:
        unknown = [kind for kind in self.step_kinds if kind not in STEP_KINDS]
        if unknown or not self.step_kinds:
            raise ValueError(f"ConfigurationSpace.step_kinds: {unknown or 'none'} (known: {', '.join(STEP_KINDS)})")
        for name, values in self.hyperparameters.items():
            if not values or len(set(map(repr, values))) != len(values):
                raise ValueError(f"ConfigurationSpace.hyperparameters[{name!r}]: at least one value, none twice")

    def factors(self) -> dict[str, tuple]:
        """Every factor of a row: the hyperparameters, then the step kind."""
        return {**self.hyperparameters, STEPS: self.step_kinds}


class OptimizerOp(Protocol):
    """What this module reads of an optimizer record (conformance.ops.optimizers.base.OptimizerOp, which
    imports this module): its declared space and its NumPy reference. The functions below take a record
    that declares a space (:func:`declares_space`)."""

    @property
    def configuration_space(self) -> ConfigurationSpace | None: ...

    def reference(self, inputs: OptimizerInputs) -> dict[str, Any]: ...

    def __hash__(self) -> int: ...  # (valid_rows and covering_rows are cached by the op)


def declares_space(op: object) -> TypeGuard[OptimizerOp]:
    """Whether ``op`` is a record with a configuration space (the configurations property, the coverage map)."""
    return getattr(op, "configuration_space", None) is not None


def space_of(op: OptimizerOp) -> ConfigurationSpace:
    """The space ``op`` declares (the callers below run only for a record that declares one)."""
    space = op.configuration_space
    assert space is not None, f"{op!r} declares no configuration_space"
    return space


# ---------------------------------------------------------------- the trajectories of each step kind

PARAM = (1.0, -2.0, 0.5, 3.0, -1.5)  # values exact in every dtype


def _sparse(indices: list[int], values: list[float]) -> CooArray:
    return CooArray(np.array([indices], dtype=np.int64), np.array(values, dtype=np.float64), (len(PARAM),))


def trajectory(kind: str) -> list[CooArray | np.ndarray]:
    """The gradients of a step kind: a duplicate index and entries left out in the sparse steps, a zero
    entry in the dense ones."""
    first, second = _sparse([2, 0, 2], [1.0, -0.5, 0.5]), _sparse([3, 0], [2.0, 0.25])
    dense = [np.array([0.5, -1.0, 0.25, 2.0, 0.0]), np.array([-0.25, 0.5, 1.0, -1.0, 0.5])]
    kinds: dict[str, list[CooArray | np.ndarray]] = {"sparse": [first, second],
            "dense": [dense[0], dense[1], dense[0]],
            "mixed": [dense[0], first, dense[1]],
            "empty": [_sparse([], []), second]}
    return kinds[kind]


def inputs_of(row: Mapping[str, Any]) -> OptimizerInputs:
    """The example of a row: the fixed parameter, the trajectory of its step kind, its hyperparameters."""
    hyper = {name: value for name, value in row.items() if name != STEPS}
    return OptimizerInputs(np.array(PARAM), trajectory(row[STEPS]), hyper)


def refusal(op: OptimizerOp, row: Mapping[str, Any]) -> str | None:
    """Why torch refuses this configuration (its documented error, as the op's NumPy reference raises it),
    or None where it runs."""
    try:
        with np.errstate(all="ignore"):
            op.reference(inputs_of(row))
    except (ValueError, RuntimeError) as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


# ---------------------------------------------------------------- the covering array

def _tuples(row: Mapping[str, Any], groups: list[tuple[str, ...]]) -> Iterator[tuple]:
    for names in groups:
        yield tuple((name, repr(row[name])) for name in names)


def strength_groups(space: ConfigurationSpace) -> list[tuple[str, ...]]:
    """The factor sets a covering array must cover every combination of: every pair of factors, and every
    triple of hyperparameters."""
    factors = list(space.factors())
    return [*itertools.combinations(factors, 2), *itertools.combinations(list(space.hyperparameters), 3)]


@functools.lru_cache(maxsize=None)
def valid_rows(op: OptimizerOp) -> tuple[dict[str, Any], ...]:
    """Every configuration of the op's space that torch runs, in the product's order (once per process: the
    covering array, the coverage map and the report read it)."""
    factors = space_of(op).factors()
    rows = [dict(zip(factors, values)) for values in itertools.product(*factors.values())]
    return tuple(row for row in rows if refusal(op, row) is None)


@functools.lru_cache(maxsize=None)
def covering_rows(op: OptimizerOp) -> tuple[dict[str, Any], ...]:
    """A covering array of the op's space (:func:`strength_groups`), from its valid configurations: greedily,
    the row that covers most combinations not yet covered, until every combination some valid row has is
    covered (deterministic: ties go to the earlier row)."""
    rows = valid_rows(op)
    groups = strength_groups(space_of(op))
    covers = [frozenset(_tuples(row, groups)) for row in rows]
    uncovered = set().union(*covers) if covers else set()
    chosen: list[dict[str, Any]] = []
    while uncovered:
        best = max(range(len(rows)), key=lambda i: len(covers[i] & uncovered))
        chosen.append(rows[best])
        uncovered -= covers[best]
    return tuple(chosen)


def uncoverable(op: OptimizerOp) -> set[tuple]:
    """The combinations of settings no configuration torch runs has (each one a refusal of torch's)."""
    groups = strength_groups(space_of(op))
    factors = space_of(op).factors()
    every = {tuple((n, repr(v)) for n, v in zip(names, values))
             for names in groups for values in itertools.product(*(factors[n] for n in names))}
    return every - set().union(*(set(_tuples(row, groups)) for row in valid_rows(op)))


# ---------------------------------------------------------------- the property

def configuration_examples(op: OptimizerOp, dtype: str) -> list[OptimizerInputs]:
    """The covering array's rows as explicit examples."""
    return [inputs_of(row) for row in covering_rows(op)]


def configurations(op: OptimizerOp, dtype: str) -> st.SearchStrategy:
    """Configurations drawn from the op's space (each factor's values, shrinking toward the first: torch's
    defaults and sparse steps), those torch refuses left out."""
    factors = space_of(op).factors()
    rows = st.fixed_dictionaries({name: st.sampled_from(values) for name, values in factors.items()})
    return rows.filter(lambda row: refusal(op, row) is None).map(inputs_of)


def step_kind(inputs: OptimizerInputs) -> str:
    """The step kind of a trajectory, as a configuration names it."""
    sparse = [isinstance(grad, CooArray) for grad in inputs.grads]
    if all(sparse):
        first = inputs.grads[0] if inputs.grads else None
        return "empty" if isinstance(first, CooArray) and first.values.size == 0 else "sparse"
    return "dense" if not any(sparse) else "mixed"


def describe(op: OptimizerOp, inputs: OptimizerInputs) -> str:
    """``weight_decay=0.1, maximize=True, dense steps``: the hyperparameters not at their first value."""
    space = space_of(op)
    settings = [f"{name}={inputs.hyperparameters[name]!r}" for name, values in space.hyperparameters.items()
                if name in inputs.hyperparameters and inputs.hyperparameters[name] != values[0]]
    return ", ".join([*settings, f"{step_kind(inputs)} steps"])


def row_of(op: OptimizerOp, inputs: OptimizerInputs) -> dict[str, Any]:
    """The configuration of an example: its hyperparameters (each factor's first value where it has none)
    and its step kind."""
    space = space_of(op)
    return {**{name: inputs.hyperparameters.get(name, values[0]) for name, values in space.hyperparameters.items()},
            STEPS: step_kind(inputs)}


def simpler_rows(op: OptimizerOp, row: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The configurations one setting simpler than ``row`` (a factor back to its first value) that torch
    runs: what a failing configuration is shrunk through."""
    for name, values in space_of(op).factors().items():
        if row[name] != values[0]:
            simpler = {**row, name: values[0]}
            if refusal(op, simpler) is None:
                yield simpler
