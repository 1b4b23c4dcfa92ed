"""pytest side of the generated cases: options, Hypothesis profiles, and a ``generated``
collector under ``specs/`` with one item per property x backend x device x dtype.

Item ids read ``specs::generated::adagrad-agrees-with-reference[coo-cpu-float32]``; select them
with ``-k generated`` (or deselect with ``-k 'not generated'`` / ``--conformance-examples 0``).
Outcomes are the suite's: passed, failed (a Mismatch on a shrunk example, written to
``reports/counterexamples/``), error, unsupported (the backend raised Unsupported), xfail
(only known divergences of stock torch were seen; the reason says which and how often).

The generated-cases stage itself (the properties bound to their checks, the Hypothesis search)
is imported when generated items are collected and run, not when the plugin loads: the plugin's
own modules stay on the low levels (tests/test_layout.py).

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import pkgutil
import random
import shutil
import tempfile
import traceback
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pytest

import conformance
from conformance.core.torch_release import NotInTorch
from conformance.run import outcomes
from conformance.run.items import ConformanceItem, placements
from conformance.run.options import DEFAULT_SEED
from conformance.run.rerun import command_for
from conformance.run.state import (candidate_targets, GENERATED, SELECTION, WORKER_FLAG, GeneratedConfig, is_conformance_run,
                                   timeout_user_set)
from conformance.core.profiles import DEFAULT_PROFILE, PROFILES
from conformance.core.types import ExampleTimedOut, Mismatch, safe_text, Unsupported
from conformance.core.devices import unavailable_reason
from conformance.cases.drawn import DrawnExamples
from conformance.core.dtypes import FLOAT_DTYPES
from conformance.backends import builtin_backends
from conformance.cases.torch_repro import TORCH_REPRODUCERS, write_layout_reproducers
from conformance.ops import OPS

if TYPE_CHECKING:  # annotations only
    from conformance.cases.trial import Property

SEED_VARIABLE = "CONFORMANCE_GENERATED_SEED"


# devices where every new input shape costs a graph compilation; generated examples all have new shapes
COMPILING_DEVICES = MappingProxyType({
    "xla": "generated cases on xla are opt-in (--conformance-generated-on-xla): XLA compiles a graph for every "
           "new shape, and every generated example has new shapes (the spec cases cover xla)",
})


class GeneratedCaseError(Exception):
    """A backend raised (not a Mismatch) on a generated example: the outcome ``error``."""




def _profile(config: pytest.Config) -> str:
    chosen = config.getoption("conformance_hypothesis_profile")
    if chosen:
        return chosen
    for variable in ("CONFORMANCE_HYPOTHESIS_PROFILE", "HYPOTHESIS_PROFILE"):
        value = os.environ.get(variable, "").strip()
        if value.startswith("conformance-"):
            value = value[len("conformance-"):]
        if value in PROFILES:
            return value
        if value and variable == "CONFORMANCE_HYPOTHESIS_PROFILE":
            raise pytest.UsageError(f"{variable}={value!r}: known profiles are {', '.join(PROFILES)}")
    return DEFAULT_PROFILE


def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    profile = _profile(config)
    examples = config.getoption("conformance_examples")
    if examples is None:
        examples = PROFILES[profile]["examples"]
    budget = config.getoption("conformance_budget")
    if budget is not None and budget < 0:
        raise pytest.UsageError(f"--conformance-budget must be >= 0 seconds (0: no budget), not {budget:g}")
    seed = config.getoption("conformance_seed")
    seed_given = seed is not None
    if seed is None and os.environ.get(SEED_VARIABLE, "").isdigit():
        seed = int(os.environ[SEED_VARIABLE])  # the controller's fresh seed, in an xdist worker
    ours = is_conformance_run(config)
    config.stash[_ENVIRONMENT_SET] = []
    if seed is None:
        seed = DEFAULT_SEED if profile == "ci" else random.SystemRandom().randrange(2**32)
        if ours:
            _set_environment(config, SEED_VARIABLE, str(seed))  # xdist workers start after this and inherit it
    # lazy: at module level the package would stand on 8 levels (tests/test_layout.py)
    from conformance.cases.counterexamples import counterexamples_directory, reports_directory

    reports = reports_directory(config)  # where the user stands, never inside the installed package
    counterexamples = counterexamples_directory(config)
    if ours and "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ:
        # keep Hypothesis' own files (.hypothesis/) out of the repository root; not those of someone's own tests
        _set_environment(config, "HYPOTHESIS_STORAGE_DIRECTORY", str(reports / "hypothesis"))
    database = reports / "hypothesis" / "examples" if PROFILES[profile]["database"] else None
    impl_targets = candidate_targets(config)
    config.addinivalue_line("markers", "generated: a generated (Hypothesis) conformance item")
    shared = getattr(config, "workerinput", {}).get(DRAWN_DIRECTORY)
    config.stash[GENERATED] = GeneratedConfig(profile, examples, seed, seed_given, counterexamples, database,
                                              impl_targets, shrink=not config.getoption("conformance_no_shrink"),
                                              budget=budget, drawn=DrawnExamples(directory=Path(shared) if shared else None),
                                              examples_given=config.getoption("conformance_examples") is not None)
    if ours:
        import_the_whole_suite()


_ENVIRONMENT_SET = pytest.StashKey[list]()


def _set_environment(config: pytest.Config, name: str, value: str) -> None:
    """Set an environment variable for this run only: :func:`pytest_unconfigure` removes it again
    (a run inside another process, ``pytest.main``, leaves that process's environment as it was)."""
    os.environ[name] = value
    config.stash[_ENVIRONMENT_SET].append(name)


def _import_package(package) -> None:
    """Import each module of ``package`` and of its subpackages, less those this environment cannot have."""
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except NotInTorch:
            continue  # e.g. conformance.kernels before torch 2.4: its backend's items say so, item by item
        except ModuleNotFoundError as exc:
            if (exc.name or "").partition(".")[0] not in OPTIONAL_DEPENDENCIES:
                raise
            # e.g. conformance.kernels._triton without triton (a CPU torch brings none): the backend
            # that needs it says so as `unsupported`, item by item, and nothing else imports it
            continue
        if info.ispkg:
            _import_package(module)


def import_the_whole_suite() -> None:
    """Import every module of the suite before anything is drawn.

    Hypothesis mixes the literals of every *local* module in ``sys.modules`` (the suite itself, in
    a clone or an editable install) into its draws, and looks again whenever a module is imported.
    A module imported lazily by an earlier item (after a failure, for one backend only) would then
    change what later items draw: ``-k``, xdist's scheduling and ``--conformance-shard`` would
    change the examples. With the whole suite imported first, the seed alone decides them."""
    _import_package(conformance)
    # torch, triton, Hypothesis and the suite leave millions of long-lived objects that each full
    # garbage collection would walk again: moved out of the collector's reach (they live as long as
    # the process anyway), the harness's tests ran 10-25% faster (tests/test_diagnosis.py and
    # tests/test_user_candidates.py in one process: 47-56 s -> 42 s on the loaded 2-core machine)
    if gc.get_freeze_count() == 0:  # given back before the interpreter ends: nanobind (triton) reports frozen objects as leaks
        atexit.register(gc.unfreeze)
    gc.freeze()


# what a module of the suite may need that the suite's own dependencies do not bring (pyproject's extras)
OPTIONAL_DEPENDENCIES = frozenset({"triton", "torch_xla", "ninja"})


DRAWN_DIRECTORY = "conformance_drawn_examples"  # xdist workerinput: the run's folder of drawn examples
_DRAWN_FOLDER = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """Each xdist worker gets the run's folder of drawn examples (cases.drawn.DrawnExamples),
    so that an example drawn in one worker is replayed in the others instead of drawn again, and
    the controller's decision whether this is a run of the suite's (``is_conformance_run``)."""
    config = node.config
    node.workerinput[WORKER_FLAG] = is_conformance_run(config)
    if not node.workerinput[WORKER_FLAG]:
        return
    if _DRAWN_FOLDER not in config.stash:
        config.stash[_DRAWN_FOLDER] = Path(tempfile.mkdtemp(prefix="conformance-drawn-"))
    node.workerinput[DRAWN_DIRECTORY] = str(config.stash[_DRAWN_FOLDER])


def pytest_unconfigure(config: pytest.Config) -> None:
    for name in config.stash.get(_ENVIRONMENT_SET, []):
        os.environ.pop(name, None)
    folder = config.stash.get(_DRAWN_FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items) -> None:
    """A generated item searches many examples: its per-item timeout (conformance/run/timeouts.py's
    --conformance-timeout, when the user set no timeout of their own) grows with the examples."""
    seconds = float(config.getoption("conformance_timeout", 0) or 0)
    gen = config.stash.get(GENERATED, None)
    if seconds <= 0 or gen is None or timeout_user_set(config):
        return
    factor = max(1.0, gen.examples / 25)
    for item in items:
        if isinstance(item, GeneratedItem) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(seconds * factor * item.backend.timeout_factor))


def pytest_report_header(config: pytest.Config) -> str | None:
    gen = config.stash.get(GENERATED, None)
    if gen is None or not is_conformance_run(config):
        return None
    if gen.examples == 0:
        return "conformance generated cases: off (--conformance-examples 0)"
    return (f"conformance generated cases: profile {gen.profile}, {gen.examples} examples per item, "
            f"seed {gen.seed} (replay with --conformance-seed {gen.seed})"
            + ("" if gen.shrink else ", failing examples not shrunk (--conformance-no-shrink)"))


def _is_specs_root(path: Path) -> bool:
    return path.name == "specs" and not any(parent.name == "specs" for parent in path.parents)


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector):
    if _is_specs_root(path) and not (path / "__init__.py").exists():
        return SpecsDir.from_parent(parent, path=path)
    return None


class SpecsDir(pytest.Dir):  # type: ignore[misc]  # (pytest marks Dir @final for typing only; subclassed on purpose)
    """The ``specs`` directory: its spec files, then the ``generated`` collector."""

    def collect(self):
        yield from super().collect()
        if self.config.stash[GENERATED].examples > 0 and is_conformance_run(self.config):
            yield GeneratedCollector.from_parent(self, name="generated")


class GeneratedCollector(pytest.Collector):
    """One item per property x backend x device x dtype, as selected on the command line."""

    def collect(self):
        from conformance.cases.properties import PROPERTIES  # the generated stage: loaded to collect its items

        selection = self.config.stash[SELECTION]
        for prop in PROPERTIES:
            if selection.ops is not None and prop.op not in selection.ops:
                continue
            for placement in placements(selection, prop.op, prop.dtypes or FLOAT_DTYPES,
                                        skip_backends=prop.skip_backends, accepts=prop.accepts):
                item = GeneratedItem.placed(self, prop.id, placement, prop=prop)
                compiling = COMPILING_DEVICES.get(placement.device)
                if compiling and not unavailable_reason(placement.device) and \
                        not self.config.getoption("conformance_generated_on_xla"):
                    item.add_marker(pytest.mark.skip(reason=compiling))
                yield item


class GeneratedItem(ConformanceItem):
    """One property searched with Hypothesis on one backend, device and dtype."""

    def __init__(self, *, prop: Property, **kwargs: Any):
        super().__init__(identity={"spec": "generated", "case": prop.id, "op": prop.op, "generated": True}, **kwargs)
        self.prop = prop
        self.add_marker(pytest.mark.generated)

    def run(self) -> None:
        # lazy: at module level the package would stand on 7 levels (tests/test_layout.py)
        from conformance.cases.search import describe_divergences, run_property
        from conformance.run.shrink_notice import notice_for

        gen = self.config.stash[GENERATED]
        if not self.backend.implements(self.prop.op):  # no example could run: none is drawn
            raise Unsupported(f"backend {self.backend.name!r} does not implement op {self.prop.op!r}")
        saved: list = []
        unreadable: str | None = None
        if self.config.getoption("conformance_item", None):  # a replay: the saved failing example first
            from conformance.cases.counterexamples import load_failing_example  # lazy: see configure

            saved, unreadable = load_failing_example(gen.counterexamples, self.name, self.prop, self.dtype)
            if unreadable:
                self.warn(pytest.PytestWarning(unreadable))
        examples = gen.examples_for(self.backend, self.device)
        if examples < gen.examples:
            self.record["examples_capped"] = (f"{examples} drawn examples, not the run's {gen.examples}: "
                                              f"{self.backend.name} emulates {self.device} (--conformance-examples "
                                              f"lifts the cap)")
        try:
            result = run_property(self.prop, self.backend, self.device, self.dtype,
                                  settings=gen.hypothesis_settings(examples),
                                  base_seed=gen.seed, database_key=self.name, budget=gen.budget_for(self),
                                  saved=saved, drawn=gen.drawn, on_failure=notice_for(self))
        except ExampleTimedOut as timed_out:
            self._timed_out(gen, timed_out)
        if result.saved:
            self.record["saved_example"] = result.saved
        self.record.update({"examples": result.examples, "unsupported_examples": result.unsupported_examples,
                            "seed": gen.seed, "profile": gen.profile,
                            "hypothesis_database": str(gen.database) if gen.database else None})
        if result.budget_note:
            self.record["budget_reached"] = result.budget_note
        if result.narrowed:
            self.record["narrowed"] = result.narrowed
        if self.backend.judged_against_torch:
            self.record["improvements"] = result.improvements
        if getattr(result, "looks_like", None) is not None:  # conformance.core.diagnosis
            self.record["looks_like"] = result.looks_like.record
        if result.unsupported is not None:
            raise outcomes.UnsupportedSkip(f"unsupported: {result.unsupported} (on all {result.unsupported_examples} "
                                           f"examples drawn)")
        if result.failure is not None:
            self._fail(gen, result)
        if result.divergences:
            self.record["known_divergences"] = dict(result.divergences)
            reproducers = self._torch_reproducers(gen, result)
            pytest.xfail(f"known divergence: {describe_divergences(result)}"
                         + "".join(f" (torch-only reproducer: {path})" for path in reproducers)
                         + (f" ({result.budget_note})" if result.budget_note else "")
                         + (f" ({result.narrowed})" if result.narrowed else ""))

    def _torch_reproducers(self, gen: GeneratedConfig, result) -> list[str]:
        """Torch-only scripts of the stock-torch divergences seen, where the example allows one (never
        losing the xfail itself)."""
        optimizer_class = self.backend.optimizer_class(self.prop.op)
        if optimizer_class is None:
            return []
        try:
            written = write_layout_reproducers(gen.counterexamples.parent / TORCH_REPRODUCERS, self.name,
                                               optimizer_class, self.dtype, result.divergence_details)
        except Exception as exc:  # noqa: BLE001 - the divergence is reported whatever happens here
            return [f"(not written: {type(exc).__name__}: {exc})"]
        if written:
            self.record["torch_reproducers"] = [str(path) for path in written]
        else:
            self.record.pop("torch_reproducers", None)
        return [str(path) for path in written]

    def _in_spec_notation(self, example: Any) -> list[str]:
        """The op inputs ``example`` stands for, as spec cases (indented lines of YAML)."""
        from conformance.cases.counterexamples import to_yaml  # lazy: see configure

        op = OPS[self.prop.op]
        shown = [to_yaml({"case": name or "inputs", "inputs": op.encode_inputs(inputs)})
                 for name, inputs in self.prop.to_cases(example, self.dtype)]
        return ["  " + line for text in shown for line in text.rstrip().splitlines()]

    def _timed_out(self, gen: GeneratedConfig, timed_out: ExampleTimedOut) -> None:
        """The item's timeout fired inside an example: the error names that example (spec notation)
        and saves it, so that ``replay`` runs it first."""
        from conformance.cases.counterexamples import save_failing_example  # lazy: see configure

        lines = [str(timed_out.timeout).strip(),
                 f"generated property {self.prop.id}, backend {self.backend.name}, device {self.device}, "
                 f"dtype {self.dtype}: the timeout fired inside an example, after {timed_out.examples_run} "
                 f"example(s) had passed"]
        if timed_out.example is not None:
            try:
                lines += ["", "the example that was running (spec notation):",
                          *self._in_spec_notation(timed_out.example)]
                save_failing_example(gen.counterexamples, self.name, timed_out.example)
                lines += ["", f"replay (runs this example first): {self.record.get('rerun') or command_for(self)}"]
            except Exception as exc:  # noqa: BLE001 - never lose the timeout itself
                lines += [f"(the example could not be shown or saved: {type(exc).__name__}: {exc})"]
        raise GeneratedCaseError("\n".join(lines)) from None

    def _fail(self, gen: GeneratedConfig, result) -> None:
        # lazy: see configure
        from conformance.cases.counterexamples import save_failing_example, write_counterexample

        failure = result.failure
        replay = self.record.get("rerun") or command_for(self) or ""  # (an item with a record has one)
        lines = [f"generated property {self.prop.id}: {self.prop.summary}",
                 f"backend {self.backend.name}, device {self.device}, dtype {self.dtype}; "
                 + ("the saved failing example, run first: still fails" if result.saved == "still fails" else
                    f"{result.examples} examples run (profile {gen.profile}, seed {gen.seed})")
                 + (f"; {result.budget_note}" if result.budget_note else "")
                 + (f"; {result.narrowed}" if result.narrowed else ""),
                 "", f"failure on the {'shrunk' if gen.shrink else 'first failing (not shrunk)'} example:", f"  {safe_text(failure).strip() or type(failure).__name__}"]
        if not isinstance(failure, Mismatch):
            lines += ["", "".join(traceback.format_exception(type(failure), failure, failure.__traceback__,
                                                             limit=-4)).rstrip()]
        example = result.failing_example
        if example is not None:
            lines += ["", f"{'shrunk' if gen.shrink else 'failing'} example (spec notation):",
                      *self._in_spec_notation(example)]
            try:
                save_failing_example(gen.counterexamples, self.name, example)
            except Exception as exc:  # noqa: BLE001 - never lose the failure itself
                lines += ["", f"(saving the failing example for replay failed: {type(exc).__name__}: {exc})"]
            target = gen.impl_targets.get(self.prop.op)
            try:
                written = write_counterexample(
                    gen.counterexamples, self.prop, self.backend, self.device, self.dtype, example, failure,
                    seed=gen.seed, replay=replay, impl_target=target.target if target else None,
                    others=builtin_backends())
            except Exception as exc:  # noqa: BLE001 - never lose the failure itself
                lines += ["", f"(writing the counterexample failed: {type(exc).__name__}: {exc})"]
            else:
                self.record.update({"counterexample": str(written.spec_path),
                                    "counterexample_script": str(written.script_path)})
                lines += ["", f"counterexample spec:   {written.spec_path}",
                          f"counterexample script: {written.script_path}",
                          *(f"  spec case {line}" for line in written.reproduced),
                          *(f"  problem: {problem}" for problem in written.problems)]
        lines += ["", f"replay: {replay}"]
        message = "\n".join(lines)
        if isinstance(failure, Mismatch):
            raise Mismatch(message, failure.max_abs_error, failure.max_rel_error) from None
        raise GeneratedCaseError(message) from None

    def repr_failure(self, excinfo, style=None):
        if excinfo.errisinstance(pytest.xfail.Exception):
            return str(excinfo.value)  # (pytest would otherwise render a long traceback to drop it)
        if excinfo.errisinstance((Mismatch, GeneratedCaseError)):
            return f"{self.nodeid}\n{excinfo.value}"
        return super().repr_failure(excinfo, style="short")

    def reportinfo(self):
        return self.path, 0, self.name  # a line is required when a skip marker reports the location
