"""pytest hooks only, registered by the entry point in a run of the suite's: collecting ``specs/**/*.yaml``, turning cases into items,
and mapping pytest's reports onto conformance outcomes.

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import traceback
import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, cast

import pytest
import torch

from conformance.run import (breaker, crashes, generated_plugin, options, outcomes, results_writer, shard,
                             shrink_notice, timeouts, transfer)
from conformance.backends import builtin_backends
from conformance.run.benchmark import benchmark_items
from conformance.backends.candidate import CandidateBackend, CandidateError, load_candidates
from conformance.backends.compiled import inductor_cache
from conformance.core.devices import DEFAULT_DEVICES, DEVICES
from conformance.ops import OPS
from conformance.core.record import CANDIDATE, ItemRecord
from conformance.core.text import safe_to_show
from conformance.run.items import (HUNG_FIRST_CALLS, ConformanceItem, HungFirstCall, first_calls_made, placements,
                                   warmed_up_last)
from conformance.run.state import (SELECTION, candidate_targets, SPEC_SUFFIXES, Selection,
                                   is_conformance_run, is_conformance_spec, relative_spec)
from conformance.judging.runner import run_item
from conformance.specs.load import Case, SpecError, load_spec
from conformance.core.dtypes import DTYPES
from conformance.core.float_env import keep_denormals
from conformance.core.types import Mismatch, exception_text, safe_text
from conformance.judging.verdict import SameAsTorch


# the plugin's other modules, each with the hooks of its part: the results file; the shrink notice;
# per-item timeouts and the native-hang watchdog; xdist transfer of collections and case contexts;
# crashed xdist workers; signals; an implementation's isolation (pytest.exit, stray threads);
# generated (Hypothesis) cases: profiles and the specs::generated collector; --conformance-shard K/N;
# --conformance-item and each record's re-run command. Their state is built by pytest_configure below,
# in one visible order. Their options are conformance.run.options' (the entry point adds them to
# every pytest run; this module and these are registered only in a run that opts in).
pytest_plugins = ["conformance.run.results_writer", "conformance.run.shrink_notice",
                  "conformance.run.timeouts", "conformance.run.transfer", "conformance.run.crashes",
                  "conformance.run.signals", "conformance.run.isolation",
                  "conformance.run.generated_plugin", "conformance.run.shard", "conformance.run.rerun"]


def _split(values: list[str] | None) -> list[str]:
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def _select(config: pytest.Config) -> Selection:
    known = builtin_backends()
    targets = list(candidate_targets(config).values())
    try:
        with _slow_import_hint(targets, _first_call_limit(config, candidate=True)):
            impls = load_candidates(targets)
    except CandidateError as exc:
        raise pytest.UsageError(str(exc)) from None
    if impls:
        known[CANDIDATE] = CandidateBackend(
            CANDIDATE, {op: obj for op, (_, obj) in impls.items()},
            description="; ".join(str(target) for target, _ in impls.values()))
    names = _split(config.getoption("conformance_backend"))
    if not names or names == ["all"]:
        names = [CANDIDATE] if impls and not names else list(known)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise pytest.UsageError(f"--conformance-backend: unknown backend(s) {', '.join(unknown)}; "
                                f"known: {', '.join(known)}")
    devices = _split(config.getoption("conformance_device")) or list(DEFAULT_DEVICES)
    bad = [d for d in devices if d not in DEVICES]
    if bad:
        raise pytest.UsageError(f"--conformance-device: unknown device(s) {', '.join(bad)}; known: {', '.join(DEVICES)}")
    dtypes = _split(config.getoption("conformance_dtype")) or None
    bad = [d for d in dtypes or [] if d not in DTYPES]
    if bad:
        raise pytest.UsageError(f"--conformance-dtype: unknown dtype(s) {', '.join(bad)}; known: {', '.join(DTYPES)}")
    ops = _split(config.getoption("conformance_op")) or None
    bad = [o for o in ops or [] if o not in OPS]
    if bad:
        raise pytest.UsageError(f"--conformance-op: unknown op(s) {', '.join(bad)}; known: {', '.join(OPS)}")
    return Selection({name: known[name] for name in names}, devices, dtypes, ops)


@contextlib.contextmanager
def _slow_import_hint(targets: list, limit: float):
    """One line on stderr, with where the import stands, when importing the candidates takes longer than
    ``limit`` seconds (the candidate's first-call limit): pytest waits for an import as long as it takes;
    check and replay bound it (--import-timeout)."""
    if not targets or limit <= 0:
        yield
        return
    main = threading.get_ident()

    def hint() -> None:
        frame = sys._current_frames().get(main)
        where = "".join(traceback.format_stack(frame)[-2:]) if frame is not None else ""
        print(f"conformance: importing the candidate ({', '.join(map(str, targets))}) has not returned after "
              f"{limit:g} s, its first-call limit (an import that hangs, or waits for input?); pytest waits for it "
              "as long as it takes, python -m conformance check and replay end it after --import-timeout. It is "
              f"at:\n{where}", file=sys.__stderr__ or sys.stderr, end="", flush=True)

    timer = threading.Timer(limit, hint)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


@pytest.hookimpl(tryfirst=True)  # before junitxml reads its path and xdist starts its workers
def pytest_configure(config: pytest.Config) -> None:
    """The run's state, built in one visible order, each module keeping its part in ``config.stash``:
    first what the command line may get wrong (a usage error leaves nothing behind), then the
    results file and its lock, then what watches the run."""
    options.configure(config)  # benchmark markers; its warnings under one xdist worker
    shard.configure(config)  # --conformance-shard K/N
    _configure_selection(config)  # backends, devices, dtypes, ops, the candidate; quiet warnings, cores
    generated_plugin.configure(config)  # profile, examples, seed, budget, counterexamples, drawn examples
    results_writer.configure(config)  # the results file (locked) and its junit beside it
    crashes.configure(config)  # xdist's worker restarts
    breaker.configure(config)  # --conformance-max-crashes: stop when the candidate crashes on every input
    timeouts.configure(config)  # the workers' watch and each worker's native-hang watchdog
    transfer.configure(config)  # the workers' collections and records on the controller
    shrink_notice.configure(config)  # --conformance-progress


def _configure_selection(config: pytest.Config) -> None:
    if is_conformance_run(config):  # before a candidate's import can import torch._dynamo, which fixes it
        inductor_cache()  # Inductor's cache: the suite's own folder, not torch's machine-wide one
    config.stash[SELECTION] = _select(config)
    config.addinivalue_line("markers", "conformance: an item generated from a spec case")
    if not is_conformance_run(config):
        return  # someone's own tests: their warnings and torch's threads are theirs
    for message in QUIET_WARNINGS:
        config.addinivalue_line("filterwarnings", f"ignore:{message}")
    _take_a_share_of_the_cores(config)


def _take_a_share_of_the_cores(config: pytest.Config) -> None:
    """An xdist worker gives torch's intra-op pool its share of the cores, not all of them. With
    every worker using every core, OpenMP's threads spin waiting for each other: on 2 cores the main
    job took 81 s instead of 61 s while the C++ kernels compiled beside it, and 52 s instead of 49
    once they were built. OMP_NUM_THREADS, when set, is left to rule."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or os.environ.get("OMP_NUM_THREADS"):
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    share = max(1, cores // max(1, int(workerinput.get("workercount", 1))))
    if torch.get_num_threads() > share:
        torch.set_num_threads(share)


QUIET_WARNINGS = (
    "The PyTorch API of MaskedTensors is in prototype stage",  # every MaskedTensor op says so
    "Sparse invariant checks are implicitly disabled",  # torch's own optimizers build COO tensors
    "It is not recommended to create a MaskedTensor with a tensor that requires_grad",  # MaskedTensor's autograd
)




def _is_spec_path(file_path: Path, config: pytest.Config) -> bool:
    """A spec to collect, in a run of the suite's only (:func:`is_conformance_run`: an explicit
    opt-in): a YAML file named on the command line, one with a top-level ``op:`` line, or any YAML
    file under ``specs/`` (so that a spec missing its ``op`` is reported, not skipped). In any other
    run no YAML file is collected: a project's ``specs/`` folder, its YAML fixtures and the
    counterexamples ``conformance check`` writes under ``reports/`` are left alone."""
    if file_path.suffix not in SPEC_SUFFIXES or not is_conformance_run(config):
        return False
    if any(Path(arg.split("::")[0]).resolve() == file_path.resolve() for arg in config.args):
        return True
    return "specs" in file_path.parts or is_conformance_spec(file_path)


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if _is_spec_path(file_path, parent.config):
        return SpecFile.from_parent(parent, path=file_path)
    return None


class SpecFile(pytest.File):
    """One YAML spec: an item per case x backend x device x dtype, or one item for a bad file."""

    def collect(self):
        try:
            spec = load_spec(self.path)
        except SpecError as error:
            yield InvalidSpecItem.from_parent(self, name="invalid-spec", error=error)
            return
        selection = self.config.stash[SELECTION]
        if selection.ops is not None and spec.op.name not in selection.ops:
            return
        for case in spec.cases:
            yield from self._items(case, selection)
        if self.config.getoption("conformance_benchmark"):
            yield from benchmark_items(self, spec, selection)

    def _items(self, case: Case, selection: Selection):
        for placement in placements(selection, case.op.name, case.dtypes, backends=case.backends,
                                    devices=case.devices):
            item = CaseItem.placed(self, case.id, placement, case=case)
            divergence = case.divergence_for(placement.backend.name, placement.device, placement.dtype)
            if divergence is not None:
                raises = {"mismatch": Mismatch, "error": divergence.expected_error(),
                          "any": BaseException}[divergence.kind]
                text = divergence.reason + (f" ({divergence.link})" if divergence.link else "")
                item.add_marker(pytest.mark.xfail(reason=f"known divergence: {text}", raises=raises, strict=False))
                item.record["divergence"] = {"reason": divergence.reason, "link": divergence.link}
            yield item


class CaseItem(ConformanceItem):
    """One case run on one backend, device and dtype."""

    def __init__(self, *, case: Case, **kwargs: Any):
        super().__init__(identity={"spec": str(case.spec_path), "case": case.id, "op": case.op.name}, **kwargs)
        self.case = case

    def run(self) -> None:
        try:
            # the item's record, which the run writes into (RunContext.record: a plain dict)
            ctx = run_item(self.case, self.backend, self.device, self.dtype, record=cast("dict[str, Any]", self.record))
        except SameAsTorch as hit:
            self.record.update({"max_abs_error": hit.mismatch.max_abs_error,
                                "max_rel_error": hit.mismatch.max_rel_error})
            pytest.xfail(f"{hit.reason}\n{hit.mismatch}")
        except Mismatch as exc:
            self.record.update({"max_abs_error": exc.max_abs_error, "max_rel_error": exc.max_rel_error})
            raise
        self.record.update(cast(ItemRecord, ctx.record))

    def repr_failure(self, excinfo, style=None):
        where = f"{self.case.spec_path}:{self.case.line}: {self.name}"
        rerun = f"\n\nreplay: {self.record['rerun']}" if self.record.get("rerun") else ""
        if excinfo.errisinstance(Mismatch):
            return f"{where}\n{excinfo.value}{rerun}"
        excinfo.traceback = excinfo.traceback.filter(
            lambda entry: not any(part in str(entry.path) for part in ("/_pytest/", "/pluggy/")))
        return f"{where}\n{super().repr_failure(excinfo, style='short')}{rerun}"

    def reportinfo(self):
        line = self.case.line - 1 if self.case.line is not None else None
        return self.path, line, f"{self.case.id}[{self.placement.id}]"


class InvalidSpecItem(pytest.Item):
    """Stands for a spec file that could not be loaded; reports the file:line error."""

    def __init__(self, *, error: SpecError, **kwargs: Any):
        super().__init__(**kwargs)
        self.error = error
        self.record: ItemRecord = {"kind": "invalid-spec", "spec": str(error.path), "case": None, "op": None, "backend": None,
                       "device": None, "dtype": None}

    def runtest(self) -> None:
        raise self.error

    def repr_failure(self, excinfo, style=None):
        return f"invalid spec: {excinfo.value}"

    def reportinfo(self):
        return self.path, (self.error.line or 1) - 1, "invalid spec"


# the first calls (imports a library makes on first use) may take this many items' timeouts
FIRST_CALLS_TIMEOUT_FACTOR = 5
# conformance check's measure of the candidate's import, in seconds (the wall time of its import probe;
# conformance.entry_points.check sets it under the same name)
CANDIDATE_IMPORT_SECONDS = "CONFORMANCE_CANDIDATE_IMPORT_SECONDS"


def first_call_limit(config: pytest.Config, backend) -> float:
    """How long a backend's first calls may take before any item runs (0: no limit). Built-in backends
    (torch's own code, its modules imported on first use): FIRST_CALLS_TIMEOUT_FACTOR items'
    timeouts. The candidate under conformance check: FIRST_CALLS_TIMEOUT_FACTOR times what importing
    it took in check's probe child on this machine (python, torch and the candidate's module: what an
    import costs here now), and at least one item's timeout. A first use's import is an import like
    those; what a hanging candidate costs is then this limit, not five minutes (issue 30). Without
    check's measure (a pytest run), the candidate gets the built-ins' limit."""
    return _first_call_limit(config, candidate=backend.name == CANDIDATE)


def _first_call_limit(config: pytest.Config, *, candidate: bool) -> float:
    timeout = float(config.getoption("conformance_timeout", 0) or 0)
    if timeout <= 0:
        return 0.0
    if candidate:
        try:
            measured = float(os.environ.get(CANDIDATE_IMPORT_SECONDS, ""))
        except ValueError:
            measured = float("nan")
        if measured > 0 and measured != float("inf"):
            return max(timeout, FIRST_CALLS_TIMEOUT_FACTOR * measured)
    return FIRST_CALLS_TIMEOUT_FACTOR * timeout


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """After deselection: the selected backends' slow setup (compiling kernels) starts in the
    background, and their items run after the others, so that it overlaps them; each backend's
    first call of each op is made before any item's timer starts (first_calls_made). A first call
    that hung (here, or in an earlier worker of this run: then it is not made again) keeps the items
    of its backend and op from running while it runs (items.HungFirstCall)."""
    if not config.getoption("collectonly"):
        items[:] = warmed_up_last(items)
        marker = timeouts.first_calls_hung_marker(config)
        earlier = timeouts.first_calls_hung_earlier(config)
        hung: list[HungFirstCall] = []
        if earlier or (marker is not None and marker.exists()):  # a replacement worker: they would hang again
            problem: str | None = "the first calls did not finish in an earlier worker of this run; not made again"
            for label, how in earlier.items():
                name, _, op = label.partition("/")
                hung.append(HungFirstCall(name, op, message=(
                    f"not run: {name}'s first call of {op} (its first explicit example, float32 on cpu) hung in an "
                    f"earlier worker of this run ({how}); an item of {name}/{op} is not run in a worker that "
                    "replaces it")))
        else:
            problem, hung = first_calls_made(items, lambda backend: first_call_limit(config, backend),
                                             timeouts.first_calls_watchdog(config))
            timeouts.first_calls_did_not_finish(config, {
                f"{call.backend}/{call.op}": f"stopped at its limit of {call.limit:g} s in another worker"
                for call in hung})
        config.stash[HUNG_FIRST_CALLS] = {(call.backend, call.op): call for call in hung}
        if problem:
            warnings.warn(pytest.PytestWarning(f"conformance: {problem}"))


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout's and the watchdogs' wrappers
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """A backend's one-time setup still under way (the C++ kernels' first build on a fresh machine, 15-20 s)
    is waited for before its item's timer starts: never charged to the item's own timeout. Flushing of
    subnormals an item turned on (core/float_env.py) is turned off after it."""
    backend = getattr(item, "backend", None)
    if isinstance(item, ConformanceItem) and backend is not None:
        backend.warmed()
    keep_denormals()  # nor what the first calls did before it (made in this thread)
    try:
        return (yield)
    finally:
        keep_denormals()  # what an item's code did to the floating-point environment stays with it


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    record: ItemRecord | None = getattr(item, "record", None)
    if record is None:
        return report
    outcome = outcomes.classify(report, call.excinfo)
    if outcome is not None:
        message = record.get("message")  # an item that raised nothing may still say something (a refusal's text)
        if call.excinfo is not None:
            exc = call.excinfo.value
            message = safe_text(exc).strip()  # a candidate's exception: its __str__ may raise
            # the harness's own exceptions (Mismatch, pytest's outcomes) read as their text; anything
            # an implementation raised is shown by its type too: "NotImplementedError", never ""
            # or a bare "float16"; SystemExit(3) would read "3"
            plain = (pytest.skip.Exception, pytest.fail.Exception, pytest.xfail.Exception)
            if not message or not (isinstance(exc, plain) or type(exc).__module__.startswith("conformance.")):
                message = exception_text(exc)
        elif hasattr(report, "wasxfail"):
            message = report.wasxfail
        written: ItemRecord = {**record, "outcome": outcomes.Outcome(outcome).value, "message": message}
        report.user_properties.append((outcomes.PROPERTY, written))
    return report


_record_of = outcomes.record_of


def pytest_report_header(config: pytest.Config) -> list[str]:
    """What this run builds that later runs in this environment find cached (a first run's extra time,
    said before it is spent)."""
    selection = config.stash.get(SELECTION, None)
    if selection is None or not is_conformance_run(config):
        return []
    builds = [text for backend in selection.backends.values()
              if (text := backend.first_run_builds(selection.devices, selection.ops))]
    if not builds:
        return []
    return [f"conformance first run in this environment: it builds {'; and '.join(builds)}. Later runs load them "
            "(what a first run costs: docs/running.md, \"A fresh machine's first run\")"]


def pytest_report_teststatus(report, config):
    record = _record_of(report)
    if record is None:
        return None
    if record["outcome"] == outcomes.UNSUPPORTED:
        return outcomes.UNSUPPORTED.value, "U", ("UNSUPPORTED", {"yellow": True})
    if record["outcome"] == outcomes.ERROR and report.failed:  # also a crashed worker's report (when "???")
        return "error", "E", ("ERROR", {"red": True})
    return None


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    counts: dict[str, Counter] = defaultdict(Counter)
    unsupported: Counter = Counter()
    for reports in terminalreporter.stats.values():
        for report in reports:
            record = _record_of(report)
            backend = record.get("backend") if record else None
            if record and backend:
                counts[backend][record["outcome"]] += 1
                if record["outcome"] == outcomes.UNSUPPORTED:
                    unsupported[(backend, (record["message"] or "").removeprefix("unsupported: "))] += 1
    if not counts:
        return
    terminalreporter.section("conformance summary")
    _summarise_verdicts(terminalreporter)
    columns = [o for o in outcomes.ALL if any(c[o] for c in counts.values())]
    width = max(12, *(len(backend) + 1 for backend in counts))
    terminalreporter.write_line(f"{'backend':<{width}}" + "".join(f"{c:>12}" for c in columns))
    for backend, counter in sorted(counts.items()):
        terminalreporter.write_line(f"{backend:<{width}}" + "".join(f"{counter[c]:>12}" for c in columns))
    for (backend, message), count in sorted(unsupported.items()):
        plural = "s" if count > 1 else ""
        terminalreporter.write_line(safe_to_show(f"UNSUPPORTED {backend}: {message} ({count} item{plural})"))


def _summarise_verdicts(terminalreporter) -> None:
    """Improvements over stock torch and stale known divergences, each listed once."""
    stale: dict[str, set] = defaultdict(set)
    improvements: dict[tuple[str | None, str], set] = defaultdict(set)
    for reports in terminalreporter.stats.values():
        for report in reports:
            record = _record_of(report)
            if not record:
                continue
            where = f"{relative_spec(record, terminalreporter.config)['spec']}::{record['case']}"
            if record.get("stale_divergence"):
                stale[where].add(record["dtype"])
            if record.get("verdict") == "improvement":
                improvements[(record["backend"], where)].add(record["dtype"])
    for where, dtypes in sorted(stale.items()):
        terminalreporter.write_line(
            f"STALE known divergence: {where} [{', '.join(sorted(dtypes))}]: stock torch "
            f"(torch {_torch_version()}) no longer shows it; update the spec's known_divergences", yellow=True)
    for (backend, where), dtypes in sorted(improvements.items()):
        terminalreporter.write_line(f"IMPROVEMENT {backend}: {where} [{', '.join(sorted(dtypes))}] conforms where "
                                    f"stock torch does not", green=True)


def _torch_version() -> str:
    return torch.__version__
