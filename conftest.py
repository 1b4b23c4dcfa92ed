"""Top-level pytest configuration. The conformance plugin itself is registered through the
``pytest11`` entry point of the installed package (``pip install -e .``); this file enables
pytester for the harness's own tests in tests/, and runs the test command (``python -m pytest``
with no paths: pyproject's testpaths, tests/) on every core with pytest-xdist when it is
installed. Items are independent; ``-n 0`` (or any ``-n``/``-p no:xdist``) overrides it, and runs
given paths (the main job: ``pytest specs ...``) stay in one process unless ``-n`` is given. Any
run here with ``-n`` and no ``--dist`` uses xdist's ``worksteal`` scheduling.

The harness's tests come in three tiers. Tests marked ``slow`` (child processes where the process
boundary is what is tested, the browser, the docs' short commands, nox, small ``conformance check``
runs) are deselected unless ``--run-slow`` is given or a ``-m`` expression names ``slow``. Tests
marked ``acceptance`` run what a user runs at its documented size, minutes each: the docs'
commands that run ``check`` at its defaults (100 examples, a worker per core), ``check``'s own
default limits, and the wheel installed into a venv from the package index. They are deselected
unless ``--run-acceptance`` is given or a ``-m`` expression names ``acceptance``:

  python -m pytest                                   # the fast tier (the README's test command)
  python -m pytest --run-slow                        # the full tier: fast and slow (minutes)
  python -m pytest --run-slow -m slow                # the slow tier alone (.ci/run runs it after the fast one)
  python -m pytest --run-acceptance -m acceptance    # the acceptance tier alone (.ci/run runs it last)
  python -m pytest --run-slow --run-acceptance       # every test

``--cpu-seconds`` puts each test's CPU seconds in the JUnit XML; ``tests/cpu_census.py`` ranks them."""

from __future__ import annotations

import os

import pytest

pytest_plugins = ("pytester",)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the harness's tests marked slow (the full tier; with -m slow, the slow tier alone)")
    parser.addoption("--run-acceptance", action="store_true", default=False,
                     help="also run the harness's tests marked acceptance: the docs' commands and check at their "
                          "default sizes, the wheel in a venv (with -m acceptance, that tier alone)")
    parser.addoption("--cpu-seconds", action="store_true", default=False,
                     help="record each test's CPU seconds (its process's and those of the child processes it "
                          "waited for, from setup to teardown) as the JUnit XML property cpu_seconds "
                          "(tests/cpu_census.py sums and ranks them; .ci/run uses it for its three tiers)")


TIERS = {"slow": "--run-slow", "acceptance": "--run-acceptance"}  # marker -> the option that runs its tier


def _runs(config: pytest.Config, marker: str) -> bool:
    """Whether this run keeps the tier of ``marker``: its option, or a ``-m`` expression naming it."""
    return config.getoption(TIERS[marker]) or marker in (config.getoption("markexpr", "") or "")


def pytest_itemcollected(item: pytest.Item) -> None:
    """Marks ``slow`` the parameter sets a test module puts in the slow tier with a function
    ``in_slow_tier(params) -> bool`` (e.g. tests/test_kernels.py: the fast tier keeps a sample)."""
    in_slow_tier = getattr(getattr(item, "module", None), "in_slow_tier", None)
    callspec = getattr(item, "callspec", None)
    if callable(in_slow_tier) and callspec is not None and in_slow_tier(callspec.params):
        item.add_marker(pytest.mark.slow)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselects the items of each tier the run does not ask for (``slow``, ``acceptance``). Only
    items carrying a tier's marker are touched: a run of the suite's specs (the main job) has none,
    and its recorded options (``-m``) stay as given."""
    left_out = [marker for marker in TIERS if not _runs(config, marker)]
    deselected = [item for item in items if any(item.get_closest_marker(m) is not None for m in left_out)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        dropped = set(map(id, deselected))
        items[:] = [item for item in items if id(item) not in dropped]


_CPU_AT_SETUP = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children it waited for (user and system)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.config.getoption("--cpu-seconds", False):
        item.stash[_CPU_AT_SETUP] = _cpu_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """With ``--cpu-seconds``: the test's CPU seconds, from its setup to its teardown (a module's fixture counted
    in its first test, as ``--durations`` does), a property of its teardown report: the JUnit XML has it,
    from xdist's workers too. pytest's ``--durations`` gives wall time only, and where the cores are shared
    (CI's 2) the wall time of a test that waits on a timeout says nothing of what it costs the others."""
    if call.when == "teardown" and _CPU_AT_SETUP in item.stash:
        item.user_properties.append(("cpu_seconds", f"{_cpu_seconds() - item.stash[_CPU_AT_SETUP]:.2f}"))
    return (yield)


def _default_workers(config: pytest.Config) -> str | int:
    """Two xdist workers per core for the full tier and the slow tier alone: most of the slow tier's
    time is spent waiting on child processes (interpreters starting, item timeouts running out,
    hangs being ended). The full tier kept 2 cores 165% busy with a worker per core (7 min 52 s) and
    196% with two per core (5 min 49 s, once torch's threads were shared). A worker per core
    otherwise: the fast tier, and any run that takes the acceptance tier, whose ``check`` runs at
    their defaults start a worker per core of their own and are held to their time bounds."""
    if not _runs(config, "slow") or _runs(config, "acceptance"):
        return "auto"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 2 * cores


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    if config.getoption("collectonly") or config.getoption("usepdb", False):
        return
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS and config.getoption("numprocesses", None) is None:
        config.option.numprocesses = _default_workers(config)
        # the test command times nothing; pytest-benchmark would otherwise warn that xdist disables it
        config.option.benchmark_disable = True
    if config.getoption("numprocesses", None) is not None and config.getoption("dist", "no") == "no":
        # items differ in cost by 1000x (a Triton-interpreted coalesce of 4096 duplicates takes 5 s):
        # an idle worker steals from a busy one instead of waiting on its queue. The main job's
        # pytest run took 53-54 s with worksteal and 75 s with xdist's default "load" (2 cores).
        config.option.dist = "worksteal"
