"""Top-level pytest configuration. The conformance plugin itself is registered through the
``pytest11`` entry point of the installed package (``pip install -e .``); this file enables
pytester for the harness's own tests in tests/, and runs the test command (``python -m pytest``
with no paths: pyproject's testpaths, tests/) on every core with pytest-xdist when it is
installed. Items are independent; ``-n 0`` (or any ``-n``/``-p no:xdist``) overrides it, and runs
given paths (the main job: ``pytest specs ...``) stay in one process as before."""

from __future__ import annotations

import pytest

pytest_plugins = ("pytester",)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    if config.args_source != pytest.Config.ArgsSource.TESTPATHS or config.getoption("numprocesses", None) is not None:
        return
    if config.getoption("collectonly") or config.getoption("usepdb", False):
        return
    config.option.numprocesses = "auto"
    # the test command times nothing; pytest-benchmark would otherwise warn that xdist disables it
    config.option.benchmark_disable = True
    if config.getoption("dist", "no") == "no":
        config.option.dist = "load"
