"""``--conformance-progress``: the console says when a generated item found a failing example and
Hypothesis shrinks it.

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import Callable

import pytest

from conformance.run.timeouts import WATCH, WATCH_DIR


class ShrinkNotice:
    """``--conformance-progress``: a generated item whose search found a failing example says so on
    the console while Hypothesis shrinks it ("shrinking <item>..."): the search calls
    :meth:`for_item`'s notice at its first failing example (``run_property``'s ``on_failure``). In an
    xdist worker the line goes to a file of the controller's :class:`WorkerWatch` folder, which the
    controller prints as it comes. (Not through Hypothesis's observability callbacks: with one
    registered, Hypothesis traces every example's lines and describes its arguments, which made
    ``check``'s items 4-5 times slower.)"""

    def __init__(self, config: pytest.Config, path: Path | None):
        self.config, self.path = config, path
        self.printer: threading.Thread | None = None
        self.stop = threading.Event()

    def for_item(self, item: pytest.Item) -> Callable[[], None] | None:
        """The notice of ``item``'s first failing example (None: it would not shrink, nothing to say)."""
        if self.config.getoption("conformance_no_shrink", False):
            return None
        return partial(self.announce, f"shrinking {item.nodeid}: an example failed; Hypothesis is looking for the "
                                      "smallest failing example (--conformance-no-shrink skips this)...")

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


def notice_for(item: pytest.Item) -> Callable[[], None] | None:
    """The shrinking notice of a generated ``item`` under ``--conformance-progress`` (else None)."""
    plugin = item.config.pluginmanager.get_plugin("conformance-progress")
    return plugin.for_item(item) if plugin is not None else None


def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    directory = getattr(config, "workerinput", {}).get(WATCH_DIR)
    if config.getoption("conformance_progress") and not config.pluginmanager.has_plugin("conformance-progress"):
        progress = Path(directory) / f"{getattr(config, 'workerinput')['workerid']}.progress" if directory else None
        config.pluginmanager.register(ShrinkNotice(config, progress), "conformance-progress")
