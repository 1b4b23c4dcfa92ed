"""``--conformance-progress``: the console says when a generated item found a failing example and
Hypothesis shrinks it.

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from conformance.run.timeouts import WATCH, WATCH_DIR

class ShrinkNotice:
    """``--conformance-progress``: a generated item whose search found a failing example says so on
    the console while Hypothesis shrinks it ("shrinking <item>..."), through Hypothesis's
    observability callbacks. In an xdist worker the line goes to a file of the controller's
    :class:`WorkerWatch` folder, which the controller prints as it comes."""

    def __init__(self, config: pytest.Config, path: Path | None):
        self.config, self.path = config, path
        self.printer: threading.Thread | None = None
        self.stop = threading.Event()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        record = getattr(item, "record", None)
        try:
            from hypothesis.internal.observability import add_observability_callback, remove_observability_callback
        except ImportError:  # an older Hypothesis: no notice
            return (yield)
        if not (isinstance(record, dict) and record.get("generated")) or self.config.getoption(
                "conformance_no_shrink", False):
            return (yield)
        said: list[bool] = []

        def observe(observation) -> None:
            if said or getattr(observation, "type", None) != "test_case" or getattr(observation, "status", "") != "failed":
                return
            said.append(True)
            self.announce(f"shrinking {item.nodeid}: an example failed; Hypothesis is looking for the smallest "
                          "failing example (--conformance-no-shrink skips this)...")

        add_observability_callback(observe)
        try:
            return (yield)
        finally:
            remove_observability_callback(observe)

    def announce(self, text: str) -> None:
        if self.path is not None:
            try:
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(text + "\n")
            except OSError:
                pass
            return
        _console(self.config, text)

    # the controller of an xdist run: print the workers' lines

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        watch = self.config.stash.get(WATCH, None)
        if self.path is None and watch is not None:
            self.printer = threading.Thread(target=self._print_workers, args=(watch.directory,),
                                            name="conformance-progress", daemon=True)
            self.printer.start()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.stop.set()

    def _print_workers(self, directory: Path) -> None:
        offsets: dict[Path, int] = {}
        while not self.stop.wait(1.0):
            for path in sorted(directory.glob("*.progress")):
                try:
                    with open(path, encoding="utf-8") as handle:
                        handle.seek(offsets.get(path, 0))
                        text = handle.read()
                        offsets[path] = handle.tell()
                except OSError:
                    continue
                for line in text.splitlines():
                    _console(self.config, line)



def _console(config: pytest.Config, text: str) -> None:
    terminal = config.pluginmanager.getplugin("terminalreporter")
    capture = config.pluginmanager.getplugin("capturemanager")
    if terminal is None:
        return
    try:
        if capture is not None and threading.current_thread() is threading.main_thread():
            with capture.global_and_fixture_disabled():
                terminal.write_line(text, yellow=True)
        else:
            terminal.write_line(text, yellow=True)
    except Exception:  # noqa: BLE001 - a notice, never worth failing a run
        pass


def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    directory = getattr(config, "workerinput", {}).get(WATCH_DIR)
    if config.getoption("conformance_progress") and not config.pluginmanager.has_plugin("conformance-progress"):
        progress = Path(directory) / f"{config.workerinput['workerid']}.progress" if directory else None
        config.pluginmanager.register(ShrinkNotice(config, progress), "conformance-progress")
