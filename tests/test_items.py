"""The three item kinds -- spec cases, generated properties, benchmarks -- come out of one pipeline
(conformance/run/items.py): one expansion into backend x device x dtype, one item base that carries
its kind and identity as data, skips an unavailable device with the reason and maps Unsupported
to the outcome unsupported."""

from __future__ import annotations

import pytest
import torch

from conformance.run.items import ConformanceItem
from conformance_runs import NO_GC_AT_EXIT

KINDS = ("case", "generated", "benchmark")


class _Collected:
    def __init__(self):
        self.items: list[pytest.Item] = []

    def pytest_collection_modifyitems(self, items):
        self.items = list(items)


def _kind(item: ConformanceItem) -> str:
    return "generated" if item.record.get("generated") else item.record["kind"]


@pytest.fixture(scope="module")
def collected():
    grab = _Collected()
    code = pytest.main(["specs", "--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *NO_GC_AT_EXIT,
                        "--conformance-benchmark", "--conformance-op", "coalesce", "--conformance-backend",
                        "dense,masked", "--conformance-device", "cpu,cuda", "--conformance-dtype", "float32"],
                       plugins=[grab])
    assert code == 0
    return grab.items


def test_every_kind_is_a_conformance_item_with_its_identity_as_data(collected):
    by_kind: dict[str, list] = {}
    for item in collected:
        assert isinstance(item, ConformanceItem), item.nodeid
        by_kind.setdefault(_kind(item), []).append(item)
    assert set(by_kind) == set(KINDS), sorted(by_kind)
    for kind, items in by_kind.items():
        for item in items:
            record = item.record
            assert record["op"] == "coalesce" and record["case"], (kind, record)
            assert (record["backend"], record["device"], record["dtype"]) == (
                item.placement.backend.name, item.placement.device, item.placement.dtype)
            assert item.name.endswith(f"[{item.placement.id}]")
    assert {i.record["case"] for i in by_kind["benchmark"]} == {"benchmark-many-indices-1000x1000-d0.05"}
    assert all(i.record["spec"] == "generated" for i in by_kind["generated"])


def test_one_expansion_for_every_kind(collected):
    """Each kind expands into the same selected backends x devices x dtype."""
    for kind in KINDS:
        placements = {(i.placement.backend.name, i.placement.device, i.placement.dtype)
                      for i in collected if _kind(i) == kind}
        assert placements == {(b, d, "float32") for b in ("dense", "masked") for d in ("cpu", "cuda")}, kind


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_an_unavailable_device_is_skipped_with_the_reason_for_every_kind(collected):
    for kind in KINDS:
        cuda = [i for i in collected if _kind(i) == kind and i.device == "cuda"]
        assert cuda and all(m.kwargs.get("reason") for i in cuda for m in i.iter_markers("skip")), kind
        assert all(any(True for _ in i.iter_markers("skip")) for i in cuda), kind
        cpu = [i for i in collected if _kind(i) == kind and i.device == "cpu"]
        assert cpu and not any(any(True for _ in i.iter_markers("skip")) for i in cpu), kind


def test_a_backend_with_slow_setup_starts_it_and_runs_its_items_last(monkeypatch):
    """The C++ kernels compile on first use (15-20 s on a fresh machine): the kernel backend starts
    the build in the background when its items are selected, and its items go after the others."""
    import conformance.kernels as kernels

    started = []
    monkeypatch.setattr(kernels, "build_in_background", lambda: started.append(True))
    grab = _Collected()
    args = ["specs", "-p", "no:cacheprovider", "-o", "addopts=", *NO_GC_AT_EXIT, "--conformance-examples", "0", "-k", "coalesce",
            "--conformance-backend", "kernel,dense,coo", "--conformance-device", "cpu", "--conformance-dtype",
            "float32", "-p", "no:randomly", "--co", "-q"]
    assert pytest.main(args, plugins=[grab]) == 0
    assert not started  # --collect-only runs nothing: nothing to build for
    order = []

    class Order:
        def pytest_collection_finish(self, session):
            order.extend(item.record["backend"] for item in session.items)

        def pytest_runtest_protocol(self, item):
            return True  # run nothing: the order is what matters here

    assert pytest.main([a for a in args if a not in ("--co", "-q")] + ["-q"], plugins=[Order()]) in (0, 5)
    assert started == [True]
    first_kernel = order.index("kernel")
    assert set(order[first_kernel:]) == {"kernel"} and {"dense", "coo"} <= set(order[:first_kernel]), order


@pytest.mark.parametrize("workers, set_threads", [(2, [1]), (4, [1]), (1, [])])  # on 2 cores, torch using 2
def test_an_xdist_worker_gives_torch_its_share_of_the_cores(monkeypatch, workers, set_threads):
    """With every worker's torch using every core, OpenMP's threads spin waiting for each other: a
    worker takes cores // workers threads (at least 1); OMP_NUM_THREADS, when set, rules."""
    import types

    from conformance.run import plugin

    set_to = []
    monkeypatch.setattr(torch, "set_num_threads", set_to.append)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(plugin.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    plugin._take_a_share_of_the_cores(types.SimpleNamespace(workerinput={"workercount": workers}))
    assert set_to == set_threads
    set_to.clear()
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    plugin._take_a_share_of_the_cores(types.SimpleNamespace(workerinput={"workercount": workers}))
    plugin._take_a_share_of_the_cores(types.SimpleNamespace())  # not a worker
    assert set_to == []
