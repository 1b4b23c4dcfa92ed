"""Fixtures shared by the harness's own tests."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """The whole suite imported before any test runs (triton included): pytester's in-process runs
    remove the modules first imported during them, and triton's native module aborts the process
    when it is initialised a second time ("refusing to add duplicate key"). A run of the suite's
    own imports it at its start (``import_the_whole_suite``); this run of the harness's tests is
    not one (``is_conformance_run``), so it does the same here -- in each process that runs tests:
    an xdist controller runs none, and its workers start only after it is configured. Each xdist
    worker also gives torch its share of the cores, as a worker of the suite's own runs does."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    from conformance.run.generated_plugin import import_the_whole_suite
    from conformance.run.plugin import take_a_share_of_the_cores

    import_the_whole_suite()
    # the in-process runs of the suite here are torch's work too: with each of the test command's
    # workers using every core, OpenMP's threads spin waiting for each other (the full tier on
    # 2 cores and 4 workers: an in-process round of slips took 50 s of CPU there and 7.5 s alone)
    take_a_share_of_the_cores(config)


@pytest.fixture(scope="session")
def warm_imports():
    """One run of the suite in this process, outside pytester, before any pytester run: pytester's
    in-process runs remove the modules first imported during them, and importing those again breaks
    the process (torch imports some lazily, e.g. torch.distributed.tensor from assert_close; triton's
    native module aborts when initialised twice). Every built-in backend runs here, kernels included."""
    from conformance_runs import run_inprocess

    run_inprocess("warm", "specs", "--conformance-op", "coalesce,adagrad", "--conformance-examples", "1", "-x", "-q",
                  "-k", "float32 and (basic or tutorial or agrees-with-reference)")
