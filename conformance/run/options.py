"""The suite's command line -- every ``--conformance-*`` option and ini value, in the order ``--help``
shows them -- and whether a pytest run is the suite's (:func:`is_conformance_run`). Imported at
every pytest start in the environment by the ``pytest11`` entry point
(:mod:`conformance.entry_points.plugin`): it imports neither torch nor Hypothesis nor the op
records, so that a project's own test runs, which the plugin leaves alone, do not pay for them.
The rest of the plugin (:mod:`conformance.run.plugin`) is registered by this module's
``pytest_configure``, only in a run that opts in.

--conformance-results PATH   write the run's results JSON to PATH (atomically: at the end, every
                             ``--conformance-results-every`` seconds while running, and when
                             interrupted), and JUnit XML beside it (``<stem>.junit.xml``) unless
                             ``--junitxml`` names another file (conformance/run/results_writer.py)
--conformance-label TEXT     the run's name in reports (default: its torch version)
--conformance-timeout S      per-item timeout through pytest-timeout (default 60 s, benchmarks 10x;
                             0 for none); ``--timeout`` or a ``timeout`` ini value takes precedence
                             (conformance/run/timeouts.py)
--conformance-max-crashes N  stop the run when the candidate's first N items in a row crashed or hung
                             and none gave a result (conformance/run/breaker.py; 0, the default: never)
--conformance-benchmark      also collect the specs' benchmark sections and time each backend

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import functools
import os
import shlex
from pathlib import Path
from typing import cast

import pytest

from conformance.core.arguments import DEFAULT_TIMEOUT, MAX_EXAMPLES, examples_count, whole_number
from conformance.core.arguments import seconds as _seconds  # one wording with check and replay
from conformance.core.profiles import PROFILES
from conformance.results.shards import OPTION as SHARD_OPTION

BENCHMARK_TIMEOUT_FACTOR = 10
DEFAULT_WRITE_EVERY = 10.0


# ---------------------------------------------------------------- whether a run is the suite's

SPEC_SUFFIXES = (".yaml", ".yml")
CONFORMANCE_RUN = pytest.StashKey[bool]()
WORKER_FLAG = "conformance_run"  # xdist workerinput: the controller's decision
OPT_IN_FLAG = "--conformance"  # the plain opt-in: a run of the suite's with its defaults
PATHS_INI = "conformance_specs"  # ini: folders of specs; a run given one of them (or a path inside) is the suite's


def is_conformance_run(config: pytest.Config) -> bool:
    """Whether this pytest run is the suite's: an explicit opt-in, as pytest plugins conventionally
    have one. It is when one of the suite's options is given (``--conformance`` or any of its
    ``--conformance-...``, :func:`own_options`, on the command line, in ``addopts`` or in
    ``PYTEST_ADDOPTS``; a project's own ``--conformance-level`` is not one), when
    ``conformance_results`` is set in the ini file, or when the ini file's ``conformance_specs``
    names folders of specs and a path argument is one of them or inside one (this repository's
    pyproject.toml names ``specs``, so ``pytest specs`` in a clone is a run of the suite's). Paths
    alone never decide: a project's own ``specs/`` folder, YAML fixtures and ``reports/`` are its own.
    The entry point is installed for every pytest run of the environment (``pytest11``); any other
    run gets this module's options and nothing else: the plugin is not even imported (no torch, no
    Hypothesis storage folder, no signal handlers, no torch thread count, no xdist worker restarts,
    no watchdog). An xdist worker takes its controller's decision."""
    if CONFORMANCE_RUN not in config.stash:
        config.stash[CONFORMANCE_RUN] = _decide(config)
    return config.stash[CONFORMANCE_RUN]


def _decide(config: pytest.Config) -> bool:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and WORKER_FLAG in workerinput:
        return bool(workerinput[WORKER_FLAG])
    try:
        addopts = list(config.getini("addopts"))
    except ValueError:
        addopts = []
    try:
        environment = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    except ValueError:  # unbalanced quotes: pytest says so itself
        environment = []
    given = [*map(str, config.invocation_params.args), *addopts, *environment]
    ours = own_options()
    if any(arg.split("=", 1)[0] in ours for arg in given):
        return True
    try:
        if config.getini("conformance_results"):
            return True
    except ValueError:
        pass
    return _names_a_spec_folder(config)


class _OptionNames:
    """Stands for pytest's parser and the suite's option group in :func:`pytest_addoption`, keeping the names."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def getgroup(self, *args, **kwargs) -> _OptionNames:
        return self

    def addoption(self, *names: str, **kwargs) -> None:
        self.names += names

    def addini(self, *args, **kwargs) -> None:
        pass


@functools.lru_cache(maxsize=None)
def own_options() -> frozenset[str]:
    """The names of the suite's options, as :func:`pytest_addoption` registers them: what opts a run in
    (a project's own ``--conformance-level`` does not)."""
    names = _OptionNames()
    pytest_addoption(cast(pytest.Parser, names))  # (the part of a Parser pytest_addoption calls)
    return frozenset(names.names)


def _names_a_spec_folder(config: pytest.Config) -> bool:
    """A path argument is one of the ini file's ``conformance_specs`` folders or inside one."""
    try:
        folders = [Path(folder).resolve() for folder in config.getini(PATHS_INI) or []]
    except ValueError:  # the option is not registered (the plugin's options are not loaded)
        return False
    if not folders:
        return False
    here = Path(config.invocation_params.dir)
    for arg in config.args:
        path = (here / str(arg).split("::")[0]).resolve()
        if any(path == folder or folder in path.parents for folder in folders):
            return True
    return False


# ---------------------------------------------------------------- the options

# a generated item's default time budget, as a share of its pytest-timeout: the rest is left for the
# example in flight when the budget runs out, the counterexample written on a failure and the replays
BUDGET_SHARE = 0.5
DEFAULT_SEED = 0  # the ci profile's base seed of the generated cases
# the names --help lists without importing torch (tests/test_opt_in.py holds them to
# conformance.core.dtypes.DTYPES and conformance.core.devices.DEVICES)
DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64")
DEVICE_NAMES = ("cpu", "cuda", "xla")


PLUGIN = "conformance.run.plugin"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Every option and ini value of the suite, in every pytest run of the environment."""
    group = parser.getgroup("conformance", "sparse/masked semantics conformance (specs/*.yaml)")
    _add_selection(group, parser)
    _add_results_and_watch(group, parser)
    _add_generated(group)
    group.addoption(SHARD_OPTION, metavar="K/N", default=None,
                    help="run only shard K of N (1 <= K <= N): the items whose node id hashes to K, the same "
                         "split on every machine and with any -n; join the N results files with "
                         "`conformance merge`")
    group.addoption("--conformance-item", action="append", metavar="ITEM",
                    help="run exactly this item (an id as the suite prints it, e.g. "
                         "specs::generated::adagrad-agrees-with-reference[coo-cpu-float32]); repeatable. "
                         "python -m conformance replay ITEM is the command that uses it.")


def _add_selection(group, parser: pytest.Parser) -> None:
    group.addoption(OPT_IN_FLAG, action="store_true", default=False, dest="conformance",
                    help="make this a run of the suite's with its defaults: collect the specs (*.yaml) and the "
                         "generated cases under the paths given. Any of its --conformance-* options or the "
                         f"'conformance_results' ini value does too, and so does a path inside a folder the "
                         f"'{PATHS_INI}' ini value names; without one of them the plugin collects and changes "
                         "nothing.")
    group.addoption("--conformance-backend", action="append", metavar="NAME[,NAME]",
                    help="backends to run (repeatable or comma-separated; 'all' for every one). "
                         "Default: every built-in backend, or only the candidates when --conformance-impl is given.")
    group.addoption("--conformance-device", action="append", metavar="DEVICE[,DEVICE]",
                    help=f"devices to run on (known: {', '.join(DEVICE_NAMES)}). Default: all of them; "
                         "an unavailable device is skipped with the reason.")
    group.addoption("--conformance-dtype", action="append", metavar="DTYPE[,DTYPE]",
                    help=f"dtypes to run ({', '.join(DTYPE_NAMES)}). Default: each case's own list.")
    group.addoption("--conformance-op", action="append", metavar="OP[,OP]",
                    help="ops to run (`conformance check --help` lists them; an unknown one is a usage error "
                         "that names the known ones). Default: all.")
    group.addoption("--conformance-impl", action="append", metavar="OP=module:attr",
                    help="gate a candidate implementation of OP as a backend named 'candidate' "
                         "(repeatable; module:attr or path/to/file.py:attr). What each op's candidate must be: "
                         "`conformance check --help`.")
    parser.addini(PATHS_INI, "folders of specs (relative to the ini file): a run given one of them, or a path "
                  "inside one, is a run of the suite's without --conformance (this repository's pyproject.toml "
                  "names specs)", type="paths", default=[])


def _add_results_and_watch(group, parser: pytest.Parser) -> None:
    group.addoption("--conformance-results", metavar="PATH", default=None,
                    help="write the run's results JSON here (atomically; also every "
                         "--conformance-results-every seconds and on interruption), and JUnit XML "
                         "beside it as <stem>.junit.xml unless --junitxml is given. "
                         "Default: the 'conformance_results' ini value, else none.")
    group.addoption("--conformance-results-every", metavar="SECONDS", type=_seconds(True), default=DEFAULT_WRITE_EVERY,
                    help=f"rewrite the results file at most this often while running (default {DEFAULT_WRITE_EVERY:g})")
    group.addoption("--conformance-label", metavar="TEXT", default=None,
                    help="the run's name in reports (default: 'torch <version>')")
    group.addoption("--conformance-progress", action="store_true", default=False,
                    help="say on the console when a generated item found a failing example and Hypothesis "
                         "shrinks it (minutes, at times): 'shrinking <item>...'; conformance check turns it on")
    group.addoption("--conformance-run-id", metavar="ID", default=None,
                    help="the run's id in the results file (default: a fresh random one); conformance check "
                         "gives its own, so that it judges only a file its own run wrote")
    group.addoption("--conformance-timeout", metavar="SECONDS", type=_seconds(False), default=DEFAULT_TIMEOUT,
                    help=f"per-item timeout via pytest-timeout (default {DEFAULT_TIMEOUT:g}; benchmark items "
                         f"x{BENCHMARK_TIMEOUT_FACTOR}; 0: none). --timeout or the 'timeout' ini value wins.")
    group.addoption("--conformance-max-crashes", metavar="N", type=whole_number, default=0,
                    help="stop the run when the candidate's first N items in a row crashed or hung (a dead "
                         "worker, a native hang, a timeout) and none gave a result: it crashes or hangs on "
                         "every input tried (default 0: never; conformance check gives 5)")
    group.addoption("--conformance-benchmark", action="store_true", default=False,
                    help="also time each backend on the specs' benchmark sections with pytest-benchmark "
                         "(add -m conformance_benchmark to run only those; needs -n 0 or -n 1)")
    parser.addini("conformance_results", "default for --conformance-results", default="")


def _add_generated(group) -> None:
    group.addoption("--conformance-examples", type=examples_count, metavar="N",
                    help="Hypothesis examples per generated item (property x backend x device x dtype); "
                         f"0 leaves the generated items out, at most {MAX_EXAMPLES:,}. Default: the profile's "
                         "(" + ", ".join(f"{k}: {v['examples']}" for k, v in PROFILES.items()) + ").")
    group.addoption("--conformance-hypothesis-profile", choices=sorted(PROFILES), metavar="PROFILE",
                    help="ci (default: fixed seed, no example database) or thorough (nightly: many examples, "
                         "a fresh seed, example database under reports/hypothesis/). "
                         "Also read from CONFORMANCE_HYPOTHESIS_PROFILE or HYPOTHESIS_PROFILE.")
    group.addoption("--conformance-seed", type=int, metavar="SEED",
                    help="base seed of the generated cases (printed with every failure, to replay it). "
                         f"Default: {DEFAULT_SEED} for ci, a fresh one for thorough.")
    group.addoption("--conformance-counterexamples", metavar="DIR",
                    help="where shrunk counterexamples are written (default: counterexamples/ beside the "
                         "--conformance-results file, else ./reports/counterexamples)")
    group.addoption("--conformance-no-shrink", action="store_true",
                    help="report a generated item's first failing example as drawn, without minimising it: the "
                         "verdict is the same and comes sooner (shrinking tries many new inputs, and libraries "
                         "that compile per input shape pay for each); the counterexample is then not minimal")
    group.addoption("--conformance-budget", type=float, metavar="SECONDS", default=None,
                    help="time budget of one generated item's search: past it, the search stops between two "
                         "examples and the verdict stands on the examples that ran ('budget reached after N "
                         f"examples'). Default: {BUDGET_SHARE:g} of the item's timeout (none without one); 0: none")
    group.addoption("--conformance-generated-on-xla", action="store_true",
                    help="also run the generated items on the xla device (skipped by default: XLA compiles a "
                         "graph for every new shape, and every generated example has new shapes)")



@pytest.hookimpl(tryfirst=True)  # the plugin's own pytest_configure runs at its registration, here
def pytest_configure(config: pytest.Config) -> None:
    """Registers the plugin in a run of the suite's, and only there; pytest calls its
    ``pytest_configure`` at once (a historic hook), before junitxml reads its path and xdist starts
    its workers."""
    if is_conformance_run(config) and not config.pluginmanager.has_plugin(PLUGIN):
        config.pluginmanager.import_plugin(PLUGIN)


def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    config.addinivalue_line("markers", "conformance_benchmark: a benchmark item (--conformance-benchmark)")
    if config.getoption("conformance_benchmark") and getattr(config.option, "numprocesses", None) == 1:
        # benchmark items keep timing in a single xdist worker (conformance/benchmark.py)
        config.addinivalue_line("filterwarnings", "ignore:Benchmarks are automatically disabled because xdist")
