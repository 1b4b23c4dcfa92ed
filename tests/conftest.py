"""Fixtures shared by the harness's own tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def warm_imports():
    """One run of the suite in this process, outside pytester, before any pytester run: pytester's
    in-process runs remove the modules first imported during them, and importing those again breaks
    the process (torch imports some lazily, e.g. torch.distributed.tensor from assert_close; triton's
    native module aborts when initialised twice). Every built-in backend runs here, kernels included."""
    from conformance_runs import run_inprocess

    for op in ("coalesce", "adagrad"):
        run_inprocess(f"warm-{op}", "specs", "--conformance-op", op, "--conformance-examples", "1", "-x", "-q",
                      "-k", "float32 and (basic or tutorial or agrees-with-reference)")
