"""torch-fused-sgd-found-inf-first-step-garbage-momentum: fused SGD keeps uninitialized memory as momentum after a first step GradScaler skipped.

torch's fused SGD with momentum (SGD(momentum>0, fused=True); _fused_sgd in torch/optim/sgd.py) makes a
parameter's momentum buffer with torch.empty_like at its first step, before the kernel runs; when
GradScaler's found_inf skips that step the kernel returns at once, so the state keeps uninitialized memory
as 'momentum_buffer', and the next step (no longer a first step) adds it into the momentum. GradScaler's
contract: a step with found_inf set changes nothing, so the run goes on as one over the later steps alone.

Compared, float32, cpu: SGD(lr=0.5, momentum=0.9, dampening=0.5, fused=True) on a 4096-entry parameter of
ones; step 1 with grad_scale 1 and found_inf 1 (gradient inf: skipped), step 2 with found_inf 0 and the
gradient 2 everywhere (actual) vs a fresh SGD(..., fused=True) taking only step 2 (expected: a first step,
buffer = gradient = 2, param = 1 - 0.5 * 2 = 0.0), bit for bit, parameter and momentum buffer. The freed
memory the buffer may reuse is first filled with 7.0; dampening 0.5 (a later step scales the gradient by
1 - dampening, a first step does not) makes even a buffer of zeros (fresh pages) give a wrong 0.5, so the
outcome does not depend on what the uninitialized memory held (it differs unless that memory happens to
hold 10/9 at every entry). Shows it when some entry differs.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch

N = 4096
HYPER = {"lr": 0.5, "momentum": 0.9, "dampening": 0.5}


def scenario():
    junk = torch.full((N,), 7.0)  # freed memory torch.empty_like may hand back
    del junk
    p, ref = torch.ones(N), torch.ones(N)
    optimizer = torch.optim.SGD([p], fused=True, **HYPER)
    fresh = torch.optim.SGD([ref], fused=True, **HYPER)
    optimizer.grad_scale, optimizer.found_inf = torch.tensor(1.0), torch.tensor(1.0)  # GradScaler: overflowed
    p.grad = torch.full((N,), float("inf"))
    optimizer.step()  # skipped: nothing should change
    print(f"after the skipped step: param unchanged {bool((p == 1.0).all())}, state keys {sorted(optimizer.state[p])}")
    optimizer.found_inf = torch.tensor(0.0)
    p.grad = torch.full((N,), 2.0)
    optimizer.step()
    ref.grad = torch.full((N,), 2.0)
    fresh.step()
    got = [p, optimizer.state[p]["momentum_buffer"]]
    want = [ref, fresh.state[ref]["momentum_buffer"]]
    print(f"expected (fresh optimizer, step 2 only): param {ref[:3].tolist()}..., buffer {want[1][:3].tolist()}...")
    print(f"actual (step 1 skipped, then step 2):    param {p[:3].tolist()}..., buffer {got[1][:3].tolist()}...")
    differ = sum(int((g != w).sum()) for g, w in zip(got, want))  # a NaN differs too
    largest = (p - ref).abs().nan_to_num(nan=float("inf")).max().item()
    return differ > 0, (f"{int((p != ref).sum())} of {N} parameter entries differ from the fresh run's "
                        f"(largest |difference| {largest:.6g}, expected 0)")


def main():
    try:
        shows, numbers = scenario()
    except Exception as exc:  # no fused= keyword, or no fused cpu kernel, on this release
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        return 3
    print(f"torch {torch.__version__}: {'shows it' if shows else 'does not show it'}: {numbers}")
    return 1 if shows else 0


if __name__ == "__main__":
    sys.exit(main())
