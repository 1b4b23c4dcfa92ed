"""Where an eager CUDA step of conformance.kernels spends its time (docs/kernels-gpu.md).

On a CUDA machine, from the repository root: ``python benchmarks/profile_cuda_step.py``. For
SparseAdam and Adagrad at 1,000,000 x 64 float32 with 16,384 looked-up rows, stock torch and the
kernel: the host time of one ``step()`` (perf_counter, no sync, median of 50), its device time
(CUDA events), the kernels one step launches (torch.profiler), and the kernel step's slowest Python
functions (cProfile, by own time).
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import time

import torch

from conformance import kernels

N, D, B = 1_000_000, 64, 16_384


def gradient() -> torch.Tensor:
    emb = torch.nn.Embedding(N, D, sparse=True, device="cuda")
    emb(torch.randint(0, N, (B,), device="cuda")).sum().backward()
    return emb.weight.grad


def timed(opt, p, grad, reps: int = 50) -> tuple[float, float]:
    """(median host µs of step() without a sync, median device µs by CUDA events)."""
    host, device = [], []
    for _ in range(reps):
        p.grad = grad
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        opt.step()
        host.append((time.perf_counter() - t0) * 1e6)
        end.record()
        end.synchronize()
        device.append(start.elapsed_time(end) * 1e3)
    return statistics.median(host), statistics.median(device)


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("profile_cuda_step.py needs CUDA (torch.cuda.is_available() is False)")
    torch.manual_seed(0)
    grad = gradient()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {N}x{D} float32, {B} rows looked up")
    for name, kw in (("SparseAdam", dict(lr=1e-3)), ("Adagrad", dict(lr=1e-2))):
        for label, cls in (("stock", getattr(torch.optim, name)), ("kernel", getattr(kernels, name))):
            p = torch.nn.Parameter(torch.zeros(N, D, device="cuda"))
            opt = cls([p], **kw)
            for _ in range(5):  # warm-up: state, Triton compiles
                p.grad = grad
                opt.step()
            torch.cuda.synchronize()
            host, device = timed(opt, p, grad)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                p.grad = grad
                opt.step()
                torch.cuda.synchronize()
            launched = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
            print(f"\n{name} {label}: host {host:.1f} us a step (no sync), device {device:.1f} us (CUDA events); "
                  f"{sum(e.count for e in launched)} device activities:")
            for e in sorted(launched, key=lambda e: -e.device_time_total)[:8]:
                print(f"  {e.count:3d} x {e.device_time_total / max(e.count, 1):8.1f} us  {e.key[:100]}")
            if label == "kernel":
                profiler = cProfile.Profile()
                profiler.enable()
                for _ in range(20):
                    p.grad = grad
                    opt.step()
                profiler.disable()
                torch.cuda.synchronize()
                print("  cProfile, 20 steps, by own time:")
                pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
