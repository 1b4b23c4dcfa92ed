"""pytest-benchmark on CUDA: conformance.kernels' Triton steps vs stock torch on the same GPU.

Skipped without CUDA. Run on a GPU machine:

    python -m pytest benchmarks/test_bench_kernels_cuda.py --benchmark-only \
        --benchmark-json=reports/bench_kernels_cuda.json
    python benchmarks/summarize.py reports/bench_kernels_cuda.json

Shapes (as in issue 12 and ../shared/gpu/kernel_speed.py): a 1,000,000 x 64 float32 embedding
whose gradient comes from ``nn.Embedding(sparse=True)`` looking up 16,384 random rows (duplicates
included), and a 1,000,000 x 128 one with 262,144 looked-up rows.

Variants per shape and operation (SparseAdam, Adagrad, coalesce):
  stock   torch.optim.SparseAdam / torch.optim.Adagrad / Tensor.coalesce()
  kernel  conformance.kernels.SparseAdam / Adagrad / coalesce (eager, no sync in the steps)
  graph   the kernel step with capturable=True, captured once in a CUDA graph and replayed
  floor   the memory floor: bytes the step must touch divided by the measured device copy
          bandwidth (a 256 MiB device-to-device copy); it is computed, not timed per round

pytest-benchmark times each round on the host as ``op(); torch.cuda.synchronize()`` (so launch
overhead and the sync are included); ``extra_info["cuda_us"]`` is the median of 20 CUDA-event
timings of the op alone, the figure the issue's table uses.
"""

from __future__ import annotations

import os
import statistics

import pytest
import torch

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (torch.cuda.is_available() is False)"),
    pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
                       reason="TRITON_INTERPRET is set: the Triton kernels would not be compiled"),
]

SHAPES = [(1_000_000, 64, 16_384), (1_000_000, 128, 262_144)]
SHAPE_IDS = [f"{n}x{d}-B{b}" for n, d, b in SHAPES]
OPTIMIZERS = {
    "sparse_adam": ("SparseAdam", dict(lr=1e-3), 3),  # param, exp_avg, exp_avg_sq
    "adagrad": ("Adagrad", dict(lr=1e-2), 2),  # param, sum
}


def cuda_event_us(fn, reps: int = 20) -> float:
    """Median device time of ``fn`` in microseconds (CUDA events), after 3 warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def synced(fn):
    def run():
        fn()
        torch.cuda.synchronize()
    return run


_BANDWIDTH: list[float] = []


def copy_bandwidth() -> float:
    """Device copy bandwidth in bytes/s (read + write of a 256 MiB buffer), measured once."""
    if not _BANDWIDTH:
        x = torch.empty(64 * 2**20, dtype=torch.float32, device="cuda")
        y = torch.empty_like(x)
        us = cuda_event_us(lambda: y.copy_(x))
        _BANDWIDTH.append(2 * x.numel() * 4 / (us * 1e-6))
    return _BANDWIDTH[0]


@pytest.fixture(scope="module", params=SHAPES, ids=SHAPE_IDS)
def shape_and_grad(request):
    rows, dim, lookups = request.param
    torch.manual_seed(0)
    emb = torch.nn.Embedding(rows, dim, sparse=True, device="cuda")
    idx = torch.randint(0, rows, (lookups,), device="cuda")
    emb(idx).sum().backward()
    grad = emb.weight.grad
    unique = int(idx.unique().numel())
    return (rows, dim, lookups, unique), grad


def touched_bytes(shape, state_tensors_plus_param: int) -> int:
    """Gradient indices and values read once, every touched row read and written per tensor."""
    rows, dim, lookups, unique = shape
    return lookups * 8 + lookups * dim * 4 + 2 * state_tensors_plus_param * unique * dim * 4


def _record(benchmark, shape, op_us, floor_bytes):
    floor_us = floor_bytes / copy_bandwidth() * 1e6
    benchmark.extra_info.update(
        cuda_us=round(op_us, 1), floor_us=round(floor_us, 1), over_floor=round(op_us / floor_us, 2),
        rows=shape[0], dim=shape[1], lookups=shape[2], unique_rows=shape[3],
        device=torch.cuda.get_device_name(), torch=torch.__version__)


def _optimizer(opt_name, variant, grad, rows, dim):
    import conformance.kernels as K

    cls_name, kwargs, _ = OPTIMIZERS[opt_name]
    param = torch.nn.Parameter(torch.zeros(rows, dim, device="cuda"))
    if variant == "stock":
        opt = getattr(torch.optim, cls_name)([param], **kwargs)
    else:
        opt = getattr(K, cls_name)([param], capturable=(variant == "graph"), **kwargs)
    param.grad = grad
    return param, opt


@pytest.mark.parametrize("variant", ["stock", "kernel", "graph"])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_step(benchmark, shape_and_grad, opt_name, variant):
    shape, grad = shape_and_grad
    rows, dim = shape[0], shape[1]
    benchmark.group = f"{opt_name}-{rows}x{dim}-B{shape[2]}"
    param, opt = _optimizer(opt_name, variant, grad, rows, dim)
    step = opt.step
    if variant == "graph":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            opt.step()
        step = graph.replay
    op_us = cuda_event_us(step)
    _record(benchmark, shape, op_us, touched_bytes(shape, OPTIMIZERS[opt_name][2]))
    benchmark.pedantic(synced(step), rounds=30, iterations=1, warmup_rounds=3)
    if variant != "stock":  # same gradient, same number of steps: compare with stock torch
        ref, ref_opt = _optimizer(opt_name, "stock", grad, rows, dim)
        steps = opt.state[param]["step"]
        for _ in range(int(steps)):
            ref_opt.step()
        torch.testing.assert_close(param.detach(), ref.detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", ["stock", "kernel"])
def test_coalesce(benchmark, shape_and_grad, variant):
    import conformance.kernels as K

    shape, grad = shape_and_grad
    benchmark.group = f"coalesce-{shape[0]}x{shape[1]}-B{shape[2]}"
    fn = grad.coalesce if variant == "stock" else (lambda: K.coalesce(grad))
    op_us = cuda_event_us(fn)
    rows, dim, lookups, unique = shape
    _record(benchmark, shape, op_us, lookups * 8 + lookups * dim * 4 + unique * (dim * 4 + 8))
    benchmark.pedantic(synced(fn), rounds=30, iterations=1, warmup_rounds=3)
    if variant == "kernel":
        torch.testing.assert_close(K.coalesce(grad).to_dense(), grad.coalesce().to_dense())


def test_floor(benchmark):
    """The copy that the floors divide by: 256 MiB device to device."""
    benchmark.group = "copy-bandwidth"
    x = torch.empty(64 * 2**20, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    benchmark.extra_info["bytes_per_s"] = copy_bandwidth()
    benchmark.pedantic(synced(lambda: y.copy_(x)), rounds=20, iterations=1, warmup_rounds=2)
