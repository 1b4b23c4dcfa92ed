"""Top-level pytest configuration. The conformance plugin itself is registered through the
``pytest11`` entry point of the installed package (``pip install -e .``); this file enables
pytester for the harness's own tests in tests/, and runs the test command (``python -m pytest``
with no paths: pyproject's testpaths, tests/) on every core with pytest-xdist when it is
installed. Items are independent; ``-n 0`` (or any ``-n``/``-p no:xdist``) overrides it, and runs
given paths (the main job: ``pytest specs ...``) stay in one process unless ``-n`` is given. Any
run here with ``-n`` and no ``--dist`` uses xdist's ``worksteal`` scheduling."""

from __future__ import annotations

import pytest

pytest_plugins = ("pytester",)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    if config.getoption("collectonly") or config.getoption("usepdb", False):
        return
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS and config.getoption("numprocesses", None) is None:
        config.option.numprocesses = "auto"
        # the test command times nothing; pytest-benchmark would otherwise warn that xdist disables it
        config.option.benchmark_disable = True
    if config.getoption("numprocesses", None) is not None and config.getoption("dist", "no") == "no":
        # items differ in cost by 1000x (a Triton-interpreted coalesce of 4096 duplicates takes 5 s):
        # an idle worker steals from a busy one instead of waiting on its queue. The main job's
        # pytest run took 53-54 s with worksteal and 75 s with xdist's default "load" (2 cores).
        config.option.dist = "worksteal"
