"""The search of one generated property on one backend, device and dtype (:func:`run_property`):
Hypothesis draws examples from the property's strategy (its explicit examples first), each runs
through the property's check on a :class:`~conformance.cases.trial.Trial` and, for a candidate,
through the three-way verdict against stock torch (:func:`three_way`); the result is a
:class:`PropertyResult`: passed, failed or error (with the shrunk counterexample), unsupported,
or passed-with-known-divergences (the caller reports those as xfail).

The examples of a clean run are kept for the next backend (:mod:`conformance.cases.drawn`), the
options a candidate cannot do are drawn at torch's default (:mod:`conformance.cases.narrowing`),
and the search stops between examples at its time budget. Only Hypothesis' public API is used
(:func:`~conformance.cases.hypothesis_test.hypothesis_test`).
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from hypothesis import reject
from hypothesis.errors import Flaky, Unsatisfiable

from conformance.core import diagnosis, tolerances
from conformance.backends import builtin_backends
from conformance.backends.base import Backend
from conformance.cases.drawn import DrawnExamples, derive_seed
from conformance.cases.hypothesis_test import hypothesis_test
from conformance.cases.narrowing import Narrowing, declared_unsupported_options
from conformance.cases.trial import SAME_AS_TORCH, DivergenceObserved, Property, Trial, same_as_torch
from conformance.core.compare import format_error
from conformance.core.interrupts import raised_by_code
from conformance.ops import OPS
from conformance.core.types import ExampleTimedOut, Mismatch, Unsupported, exception_text
from conformance.judging.verdict import (Judgement, SameAsTorch, StockTorch, Verdict, agrees, differs,
                                 distance, first_line, judge, torch_opinion)

UNSUPPORTED_BUDGET = 25  # examples drawn before an item on which none can run is reported unsupported


class _NothingRuns(BaseException):
    """Ends a Hypothesis run whose first UNSUPPORTED_BUDGET examples were all unsupported
    (Hypothesis does not catch BaseException subclasses)."""


class _BudgetReached(BaseException):
    """Ends a search whose time budget ran out, between two examples (never inside one): the
    verdict stands on the examples that ran."""


class Nondeterministic(Mismatch):
    """The backend failed an example once and passed it when Hypothesis ran it again (Hypothesis'
    ``Flaky``): a nondeterministic implementation, reported as such -- never an internal error."""


class ImplementationRaised(Exception):
    """A BaseException that is not an Exception (SystemExit, GeneratorExit, a class of its own) raised
    inside an example by the code under test: Hypothesis stops at such an exception without shrinking
    or reporting the example, so the search sees this failure instead (the original as its cause)."""


def as_failure(exc: BaseException) -> BaseException:
    """``exc`` as the failure of an example: itself, unless it is a BaseException of the code under
    test that is not an Exception (a KeyboardInterrupt it raised itself, not a Ctrl-C; not pytest's or
    Hypothesis' own): ImplementationRaised."""
    if isinstance(exc, (Exception, _NothingRuns, _BudgetReached)):
        return exc
    if isinstance(exc, KeyboardInterrupt) and not raised_by_code(exc):
        return exc  # a SIGINT: the run's end
    if (type(exc).__module__ or "").partition(".")[0] in ("_pytest", "pytest", "hypothesis"):
        return exc
    return ImplementationRaised(f"the implementation raised {first_line(exc)} (not an Exception) inside this example")


def _is_pytest_timeout(exc: BaseException) -> bool:
    outcomes = __import__("sys").modules.get("_pytest.outcomes")
    return outcomes is not None and isinstance(exc, outcomes.Failed) and str(exc).startswith("Timeout")


@dataclass
class PropertyResult:
    examples: int = 0
    unsupported_examples: int = 0
    improvements: int = 0  # examples a candidate gets right where stock torch does not
    divergences: Counter = field(default_factory=Counter)
    divergence_details: dict = field(default_factory=dict)
    unsupported: Unsupported | None = None
    first_unsupported: Unsupported | None = None
    failure: BaseException | None = None
    failing_example: Any = None
    seed: int | None = None
    looks_like: Any = None  # the known mistake (conformance.core.diagnosis.Mistake) the failing example shows
    budget: float | None = None  # seconds the search may take (None: no limit)
    budget_reached: bool = False  # the search stopped between two examples when the budget ran out
    last_failure: BaseException | None = None  # what the latest failing example raised (shrinking: the smallest)
    narrowed: str | None = None  # how the input space was narrowed to what the backend supports (Narrowing)
    saved: str | None = None  # a saved failing example run first: "still fails" / "passes now" (run_property)

    @property
    def budget_note(self) -> str | None:
        """"budget reached after N examples (S s)" when the search was cut short, else None."""
        if not self.budget_reached:
            return None
        return (f"budget reached after {self.examples} examples ({self.budget:g} s; --conformance-budget): the "
                f"verdict stands on those")


def _agreement(prop: Property, trial: Trial, torch_trial: Trial, example: Any, seen: dict) -> bool:
    """Whether the backend's outputs on ``example`` are stock torch's (within
    :func:`conformance.core.tolerances.agreement`): the property's own observation (``observe``),
    else each of the example's cases run alone. Leaves in ``seen`` what the verdict's messages
    need: the outputs compared and their tolerances, or how far apart they are."""
    observe = prop.observe
    runs: list[Callable[[], tuple[dict[str, Any], dict[str, Any]]]]
    if observe is not None:  # the property's own outputs, not its cases' single runs
        runs = [lambda: (observe(trial, example), observe(torch_trial, example))]
    else:
        def both(inputs: Any) -> Callable[[], tuple[dict[str, Any], dict[str, Any]]]:
            return lambda: (trial.run(inputs), torch_trial.run(inputs))

        runs = [both(inputs) for _, inputs in prop.to_cases(example, trial.dtype)]
    seen["runs"] = len(runs)
    for run in runs:
        try:
            ours, theirs = run()
        except Exception:  # noqa: BLE001 - one of them raises on these inputs: not the same behaviour
            return False
        tols = tolerances.agreement_with(trial.op, theirs, trial.dtype)
        if not agrees(ours, theirs, tols, list(theirs)):
            apart = distance(ours, theirs)  # NaN and inf shown as everywhere else (compare.format_error)
            seen["note"] = "misses the property too, but differently" + (
                f" (max abs difference {format_error(apart)})" if apart is not None else "")
            return False
        seen.update(ours=ours, tols=tols)
    return True


def three_way(prop: Property, trial: Trial, torch_trial: Trial, example: Any, failure: Mismatch | None) -> Judgement:
    """The three-way verdict (:func:`conformance.judging.verdict.judge`, the one judging core) on one
    generated example: stock torch runs the same property on the same example
    (:func:`conformance.judging.verdict.torch_opinion`). Returns the judgement (``improvement`` where the
    backend has the property and torch does not); raises DivergenceObserved when the backend misses
    the property exactly as torch does, and the failure (:func:`conformance.judging.verdict.differs`, torch's
    account beside it) when it differs."""
    torch_run = torch_opinion(lambda: prop.check(torch_trial, example))
    seen: dict = {}
    try:
        judgement = judge(failure, torch_run, lambda: _agreement(prop, trial, torch_trial, example, seen), None)
    except SameAsTorch:
        single = prop.observe is None and seen.get("runs") == 1
        explained = trial.known_divergence(prop.to_cases(example, trial.dtype)[0][1], seen["ours"],
                                           seen["tols"]) if single else None
        divergence = explained or SAME_AS_TORCH
        raise DivergenceObserved(same_as_torch(divergence), str(failure).splitlines()[0]) from None
    if judgement.verdict is Verdict.DIFFERS:
        note = "has the property" if torch_run is not None and torch_run.conforms else seen.get("note")
        assert failure is not None  # (judge: differs only where the backend missed the property)
        raise differs(failure, torch_run, on="example", torch_note=note) from None
    return judgement


def judge_example(prop: Property, backend: Backend, device: str, dtype: str, example: Any) -> PropertyResult:
    """One example of ``prop`` judged as the search judges each of its examples (the property's check,
    known divergences, the three-way verdict against stock torch), outside any budget: the result's
    ``failure`` is set when it fails; an example the backend cannot run raises ``Unsupported``.
    What ``conformance replay`` and a counterexample script run."""
    op = OPS[prop.op]
    trial = Trial(op, backend, device, dtype)
    torch_trial = _torch_trial(prop, op, backend, device, dtype)
    result = PropertyResult()
    check = _example_check(prop, trial, torch_trial, result, replaying=True)
    try:
        check(copy.deepcopy(example))
    except (KeyboardInterrupt, SystemExit, Unsupported):
        raise
    except ExampleTimedOut:
        raise
    except BaseException as exc:  # noqa: BLE001 - the failure, as the search would report it
        result.failure = exc
        _name_the_mistake(result, prop, trial, example)
    return result


def _name_the_mistake(result: PropertyResult, prop: Property, trial: Trial, example: Any) -> None:
    """What ``result``'s failure on ``example`` looks like (the op's catalogue of mistakes), named in
    the failure; nothing where the property judges a refusal, not values (``Property.judges_values``)."""
    if not prop.judges_values:
        return
    try:
        result.looks_like = diagnosis.looks_like_example(trial.op, prop.to_cases(example, trial.dtype), trial.run,
                                                         trial.dtype)
    except BaseException as exc:  # the diagnosis runs the implementation again: its SystemExit names nothing
        if as_failure(exc) is exc:
            raise
        return
    if result.looks_like is not None and result.failure is not None:  # (the failure just kept)
        result.failure = diagnosis.annotated(result.failure, result.looks_like)


def _torch_trial(prop: Property, op, backend: Backend, device: str, dtype: str) -> Trial | None:
    """Stock torch on the same examples, the second opinion on a candidate's: torch's own implementation
    of the op; for a property that hands the step GradScaler's grad_scale/found_inf (grad-scaling), the
    built-in backend of torch's own path that takes them (fused), since torch's for-loop step ignores
    found_inf and steps (the same as a candidate that does, were it asked). None: no second opinion."""
    if not backend.judged_against_torch or op.torch_implementation is None:
        return None
    if prop.needs_grad_scaling:
        scaling = next((other for other in builtin_backends().values() if other.takes_grad_scaling
                        and other.torch_path is not None and other.implements(op.name)), None)
        return Trial(op, scaling, device, dtype) if scaling is not None else None
    return Trial(op, StockTorch(), device, dtype)


def run_property(prop: Property, backend: Backend, device: str, dtype: str, *, settings, base_seed: int,
                 database_key: str | None = None, budget: float | None = None,
                 saved: list | None = None, drawn: DrawnExamples | None = None,
                 on_failure: Callable[[], None] | None = None) -> PropertyResult:
    """Search ``prop`` on one backend/device/dtype with Hypothesis under ``settings`` (replaying the
    examples of an earlier clean run of the same property and dtype kept in the run's ``drawn``, where
    that gives the same verdict; see :class:`DrawnExamples`; None: nothing kept, nothing replayed). With ``budget`` (seconds), the search stops between two examples once
    it has run that long, and the verdict stands on the examples that ran (``budget_reached``).
    ``saved`` failing examples (a replay's) run first, outside the budget: one that still fails is
    the verdict, with no search; when all pass now, the search runs as usual. ``on_failure`` is called
    once, when the search finds its first failing example (before Hypothesis shrinks it)."""
    still_fails = _saved_failure(prop, backend, device, dtype, saved, base_seed)
    if still_fails is not None:
        return still_fails
    deadline = time.monotonic() + budget if budget else None
    if prop.max_examples is not None and settings.max_examples > prop.max_examples:
        settings = type(settings)(settings, max_examples=prop.max_examples)
    op = OPS[prop.op]
    trial = Trial(op, backend, device, dtype)
    torch_trial = _torch_trial(prop, op, backend, device, dtype)
    narrowing = Narrowing(op, declared_unsupported_options(op, backend), keep_invalid=prop.name == "rejects-invalid")
    store = drawn if drawn is not None else DrawnExamples(capacity=0)
    key = store.key(prop, dtype, settings, base_seed, narrowing.declared)
    kept = store.get(key)
    if kept is not None:
        replayed = PropertyResult(seed=base_seed, budget=budget, saved="passes now" if saved else None)
        if _replayed_clean(_example_check(prop, trial, torch_trial, replayed, replaying=True, deadline=deadline),
                           kept):
            store.replayed += 1
            return replayed
    result = PropertyResult(seed=base_seed, budget=budget, saved="passes now" if saved else None)
    examples: list = []
    check = _example_check(prop, trial, torch_trial, result, record=examples if key is not None else None,
                           deadline=deadline, narrowing=narrowing, on_failure=on_failure)
    _search(prop, dtype, check, result, settings=settings, base_seed=base_seed, database_key=database_key,
            narrowing=narrowing)
    result.narrowed = narrowing.describe()
    if result.failure is not None and result.failing_example is not None:
        _name_the_mistake(result, prop, trial, result.failing_example)
    if result.failure is None and result.unsupported is None and result.unsupported_examples == 0 \
            and not result.budget_reached:  # a cut-short run is not what Hypothesis would draw in full
        store.keep(key, examples)
    return result


def _saved_failure(prop: Property, backend: Backend, device: str, dtype: str, saved: list | None,
                   base_seed: int) -> PropertyResult | None:
    """The first of a replay's ``saved`` failing examples that still fails, judged; None when all
    pass now (or the backend cannot run them)."""
    for example in saved or ():
        try:
            judged = judge_example(prop, backend, device, dtype, example)
        except Unsupported:
            continue
        if judged.failure is not None:
            judged.failing_example, judged.examples, judged.seed, judged.saved = example, 1, base_seed, "still fails"
            return judged
    return None


def _replayed_clean(check: Callable[[Any], None], kept: list) -> bool:
    """Whether the ``kept`` examples of an earlier clean run pass ``check`` again (or pass until the
    budget ran out); when not, Hypothesis decides (and shrinks)."""
    try:
        for example in kept:
            check(copy.deepcopy(example))
    except _BudgetReached:  # every example that ran passed: the verdict stands on them
        return True
    except (ExampleTimedOut, KeyboardInterrupt):
        raise
    except BaseException:  # noqa: BLE001 - not clean: Hypothesis decides (and shrinks)
        return False
    return True


def _example_check(prop: Property, trial: Trial, torch_trial: Trial | None, result: PropertyResult, *,
                   record: list | None = None, replaying: bool = False,
                   deadline: float | None = None, narrowing: Narrowing | None = None,
                   on_failure: Callable[[], None] | None = None) -> Callable[[Any], None]:
    """The check of one example, counted into ``result`` (and the example kept in ``record``); an
    unsupported example is rejected (Hypothesis draws another), or raised when ``replaying``. Past
    ``deadline`` (time.monotonic), the next example is not run: the search ends (_BudgetReached).
    ``on_failure`` is called at the first failing example."""

    def generated_case(example):
        if deadline is not None and (result.examples or result.unsupported_examples) and time.monotonic() > deadline:
            result.budget_reached = True
            raise _BudgetReached()
        if record is not None and result.failing_example is None and not result.unsupported_examples:
            record.append(copy.deepcopy(example))  # before the backend sees it; only a clean run is kept
        try:
            prop.check(trial, example)
        except DivergenceObserved as hit:
            result.examples += 1
            _observed(result, hit, example)
        except Unsupported as exc:  # this example only: Hypothesis draws another
            if replaying:
                raise
            _unsupported_example(result, exc, example, narrowing)
        except Mismatch as mismatch:
            result.examples += 1
            if not _known_error(prop, trial, example, mismatch, result):
                _judged_mismatch(prop, trial, torch_trial, result, example, mismatch, on_failure)
        except BaseException as exc:
            if _is_pytest_timeout(exc):
                raise ExampleTimedOut(exc, example, result.examples) from None
            result.examples += 1
            if _known_error(prop, trial, example, exc, result):
                return
            failure = as_failure(exc)
            _failed(result, example, failure, on_failure)
            if failure is exc:
                raise
            raise failure from exc
        else:
            result.examples += 1
            if torch_trial is not None and three_way(prop, trial, torch_trial, example, None).verdict \
                    is Verdict.IMPROVEMENT:
                result.improvements += 1

    return generated_case


def _known_error(prop: Property, trial: Trial, example: Any, error: BaseException, result: PropertyResult) -> bool:
    """Whether ``error`` (raised by the example's run, or a Mismatch raised from one) is a registered error
    of stock torch's that this example brings out (a ConditionalDivergence of kind "error": its type and
    message pinned, on the releases that show it); then it is counted as that divergence."""
    if isinstance(error, (KeyboardInterrupt, SystemExit)) or (isinstance(error, Mismatch) and error.__cause__ is None):
        return False
    try:
        trial.excuse_conditional(prop.name, example, f"raises {exception_text(error)}", kind="error", error=error)
    except DivergenceObserved as hit:
        _observed(result, hit, example)
        return True
    return False


def _failed(result: PropertyResult, example: Any, failure: BaseException,
            on_failure: Callable[[], None] | None) -> None:
    """Keep ``example`` as the failing one; ``on_failure`` is called at the first."""
    first = result.failing_example is None
    result.failing_example, result.last_failure = example, failure
    if first and on_failure is not None:
        on_failure()


def _observed(result: PropertyResult, hit: DivergenceObserved, example: Any) -> None:
    """Count a known divergence met on ``example`` (the first example of each kept as its detail)."""
    result.divergences[hit.divergence.key] += 1
    result.divergence_details.setdefault(hit.divergence.key, (hit.divergence, hit.detail, example))


def _unsupported_example(result: PropertyResult, exc: Unsupported, example: Any, narrowing: Narrowing | None) -> None:
    """An example the backend cannot run: counted, its option learnt, and rejected (Hypothesis draws
    another); the search ends (_NothingRuns) when the first UNSUPPORTED_BUDGET examples all were."""
    result.unsupported_examples += 1
    result.first_unsupported = result.first_unsupported or exc
    if narrowing is not None and result.failing_example is None:
        narrowing.learn(exc, example)  # the next draws leave that option at torch's default
    if result.examples == 0 and result.unsupported_examples >= UNSUPPORTED_BUDGET:
        raise _NothingRuns() from None
    reject()


def _judged_mismatch(prop: Property, trial: Trial, torch_trial: Trial | None, result: PropertyResult, example: Any,
                     mismatch: Mismatch, on_failure: Callable[[], None] | None) -> None:
    """An example that misses the property: returns when it is the same as stock torch's (the search
    goes on), else raises the failure (differing from both, with torch's account, for a candidate)."""
    if torch_trial is not None:
        try:
            three_way(prop, trial, torch_trial, example, mismatch)
        except DivergenceObserved as hit:  # the same as torch: the search goes on
            _observed(result, hit, example)
            return
        except Mismatch as differs_from_both:
            _failed(result, example, differs_from_both, on_failure)
            raise differs_from_both from None
    _failed(result, example, mismatch, on_failure)
    raise mismatch


def _search(prop: Property, dtype: str, generated_case: Callable[[Any], None], result: PropertyResult, *,
            settings, base_seed: int, database_key: str | None, narrowing: Narrowing | None = None) -> None:
    """Hypothesis's search of ``prop`` for ``dtype`` with ``generated_case`` as the test; its end in ``result``."""
    def test_case(drawn):
        generated_case(drawn)

    assert prop.strategy is not None  # (a property bound to its op: property_of)
    strategy = prop.strategy(dtype)
    explicit = prop.examples(dtype)
    if narrowing is not None and narrowing.op.option_names():
        strategy, explicit = strategy.map(narrowing.apply), [narrowing.apply(each) for each in explicit]
    test = hypothesis_test(test_case, strategy, explicit, settings, seed=derive_seed(base_seed, prop, dtype),
                            database_key=database_key or prop.id)
    try:
        test()
    except _NothingRuns:
        result.unsupported = result.first_unsupported
    except _BudgetReached:  # between two examples: a failure found so far stands (its smallest example yet)
        if result.failing_example is not None:
            result.failure = result.last_failure
        elif result.examples == 0 and result.first_unsupported is not None:
            result.unsupported = result.first_unsupported
    except ExampleTimedOut:
        raise
    except Flaky as flaky:
        timeout = _timeout_in(flaky)
        if timeout is not None:  # the timeout fired in an example Hypothesis ran again, or in its own code
            raise timeout from None
        result.failure = _nondeterministic(flaky, result)
    except Unsatisfiable:
        if result.examples == 0 and result.first_unsupported is not None:
            result.unsupported = result.first_unsupported  # no example could run at all
        else:
            raise
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) or _is_pytest_timeout(exc):
            raise
        result.failure = exc


def _timeout_in(flaky: BaseException) -> BaseException | None:
    """The item's timeout among the failures of Hypothesis' ``Flaky`` (it wraps a BaseException in an
    exception of its own, the original as its cause): the example's (ExampleTimedOut) first."""
    found = [e.__cause__ if type(e).__name__ == "_WrappedBaseException" else e for e in getattr(flaky, "exceptions", ())]
    return next((e for e in found if isinstance(e, ExampleTimedOut)), None) or \
        next((e for e in found if e is not None and _is_pytest_timeout(e)), None)


def _nondeterministic(flaky: BaseException, result: PropertyResult) -> Nondeterministic:
    """Hypothesis' Flaky as what it says about the backend: the same example failed once and passed
    (or failed differently) when run again."""
    inner = next(iter(getattr(flaky, "exceptions", ()) or ()), None) or result.last_failure
    said = (str(inner).strip().splitlines() or [type(inner).__name__])[0] if inner is not None else ""
    return Nondeterministic(
        "nondeterministic: the backend failed an example and then passed it (or failed it differently) when the "
        f"same example ran again (Hypothesis: {type(flaky).__name__}); run the property 'deterministic' on it"
        + (f"\n  the first run: {type(inner).__name__}: {said}" if inner is not None else ""))


def describe_divergences(result: PropertyResult) -> str:
    parts = []
    for key, count in result.divergences.items():
        divergence, detail, _ = result.divergence_details[key]
        link = f" ({divergence.link})" if divergence.link else ""
        parts.append(f"{divergence.reason}{link} -- on {count} of {result.examples} examples; e.g. {detail}")
    return "; ".join(parts)


