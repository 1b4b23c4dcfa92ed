"""Flush-to-zero turned on by one item's code (torch 2.5's compiled C++ loads with -ffast-math's
constructor) is turned off after it: no later item computes, compares or draws with subnormals as zero
(conformance/core/float_env.py)."""

from __future__ import annotations

import torch

from conformance.core.float_env import SMALLEST_SUBNORMAL, denormals_flushed, keep_denormals


def test_flushing_turned_on_is_seen_and_turned_off():
    assert not denormals_flushed()
    assert torch.set_flush_denormal(True)  # x86 with SSE3: FTZ and DAZ on, as crtfastmath's constructor sets them
    try:
        assert denormals_flushed() and not SMALLEST_SUBNORMAL > 0
        assert keep_denormals() is True
        assert not denormals_flushed() and SMALLEST_SUBNORMAL > 0
    finally:
        torch.set_flush_denormal(False)
    assert keep_denormals() is False


def test_an_item_that_turns_flushing_on_leaves_it_off_for_the_next():
    from conformance_runs import load, run_inprocess
    from tests.candidates import flushing

    flushing.SEEN.clear()
    code, path = run_inprocess("flushing", "specs/coalesce.yaml", "-k", "basic-2x3", "--conformance-backend",
                               "candidate", "--conformance-impl=coalesce=tests.candidates.flushing:coalesce")
    try:
        assert code == 0, [(r["nodeid"], r["outcome"], r["message"]) for r in load(path)["records"]]
        # the candidate turned flushing on in each call, and each item's call found it off
        assert len(flushing.SEEN) >= 2 and not any(flushing.SEEN), flushing.SEEN
    finally:
        torch.set_flush_denormal(False)
    assert not denormals_flushed()
