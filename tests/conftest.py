"""Fixtures shared by the harness's own tests."""

from __future__ import annotations

import os
import signal

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """The whole suite imported before any test runs (triton included): pytester's in-process runs
    remove the modules first imported during them, and triton's native module aborts the process
    when it is initialised a second time ("refusing to add duplicate key"). A run of the suite's
    own imports it at its start (``import_the_whole_suite``); this run of the harness's tests is
    not one (``is_conformance_run``), so it does the same here -- in each process that runs tests:
    an xdist controller runs none, and its workers start only after it is configured. First, torch
    gets one thread in every process of the run (:func:`_one_torch_thread_per_process`)."""
    _one_torch_thread_per_process(config)
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    from conformance.run.generated_plugin import import_the_whole_suite

    import_the_whole_suite()


def _one_torch_thread_per_process(config: pytest.Config) -> None:
    """``OMP_NUM_THREADS=1`` for this run of the harness's tests and every process it starts
    (restored at its end; a value already set is left alone). The tests start many small torch
    processes side by side -- xdist workers, ``check``, its workers, replays -- on tensors too small
    for intra-op parallelism; with two threads each, OpenMP's threads spin waiting for each other
    (the full tier on 2 cores and 4 workers: an in-process round of slips took 50 s of CPU there and
    7.5 s alone). Results do not depend on it; the suite's own xdist workers share the cores the
    same way (``conformance.run.plugin._take_a_share_of_the_cores``)."""
    if "OMP_NUM_THREADS" in os.environ:
        return
    os.environ["OMP_NUM_THREADS"] = "1"
    config.add_cleanup(lambda: os.environ.pop("OMP_NUM_THREADS", None))


@pytest.fixture(scope="session")
def warm_imports():
    """One run of the suite in this process, outside pytester, before any pytester run: pytester's
    in-process runs remove the modules first imported during them, and importing those again breaks
    the process (torch imports some lazily, e.g. torch.distributed.tensor from assert_close; triton's
    native module aborts when initialised twice). Every built-in backend runs here, kernels included."""
    from conformance_runs import run_inprocess

    run_inprocess("warm", "specs", "--conformance-op", "coalesce,adagrad", "--conformance-examples", "1", "-x", "-q",
                  "-k", "float32 and (basic or tutorial or agrees-with-reference)")


@pytest.fixture
def sigint_handler(request):
    """SIGINT's handler for the test, ``request.param`` (Python's own, as in a terminal, or ignored, as a
    run started in the background of a script inherits it), restored after it."""
    previous = signal.signal(signal.SIGINT, request.param)
    yield request.param
    signal.signal(signal.SIGINT, previous)
