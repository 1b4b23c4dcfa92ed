"""The run's command-line options beyond the selection: results files, progress notices, per-item
timeouts and benchmarks. Loaded through ``pytest_plugins`` in :mod:`conformance.run.plugin`, where
its place in the list keeps these options in the order ``--help`` has always shown them.

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

import argparse
import math

import pytest

from conformance.core.arguments import whole_number

DEFAULT_TIMEOUT = 60.0
BENCHMARK_TIMEOUT_FACTOR = 10
DEFAULT_WRITE_EVERY = 10.0


MAX_SECONDS = 7 * 24 * 3600  # a week: beyond it the timers (setitimer, faulthandler's watchdog) overflow


def _seconds(minimum_exclusive: bool):
    """An argparse type: a finite number of seconds, > 0 or >= 0, at most a week (pytest reports a
    bad one as a usage error)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < 0 or (minimum_exclusive and value == 0):
            raise argparse.ArgumentTypeError(
                f"{text!r}: must be a finite number of seconds {'> 0' if minimum_exclusive else '>= 0'}")
        if value > MAX_SECONDS:
            raise argparse.ArgumentTypeError(f"{text!r}: must be at most {MAX_SECONDS} seconds (a week)")
        return value

    return parse


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance")
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



def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    config.addinivalue_line("markers", "conformance_benchmark: a benchmark item (--conformance-benchmark)")
    if config.getoption("conformance_benchmark") and getattr(config.option, "numprocesses", None) == 1:
        # benchmark items keep timing in a single xdist worker (conformance/benchmark.py)
        config.addinivalue_line("filterwarnings", "ignore:Benchmarks are automatically disabled because xdist")
