"""torch-fused-rounding: fused Adagrad/SGD round otherwise than the for-loop step (a few ulps apart).

torch's fused steps compute the whole update in one kernel (float32 arithmetic for a float16/bfloat16
parameter, rounded once when stored; another order of the same operations in float32/float64), where the
for-loop step rounds each intermediate it stores: the two differ by a few ulps, both within the tolerance
of a correct implementation.

Compared, fused=True (actual) vs foreach=False, fused=False (expected), bit for bit, on cpu; the float64
value of the documented step (from the gradients as stored in the dtype) is printed for reference:
  Adagrad(lr=0.1), two steps on [0.5] with gradients [0.1], [0.3], float16 (the dtype the suite saw);
  Adagrad(lr=0.1), two steps on [0.5] with gradients [0.5], [0.5], float64;
  SGD(lr=0.2, momentum=0.9), two steps on [0.5] with gradients [0.3], [0.3], float64.
Shows it when some pair differs, by at most 8 epsilons of the dtype times the magnitude (a rounding, not
some other divergence: a larger difference is reported as not this one).

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import math
import sys

import torch


def run(cls, dtype, start, grads, fused, **hyper):
    p = torch.tensor([start], dtype=dtype)
    optimizer = cls([p], **hyper, **({"fused": True} if fused else {"foreach": False}))
    for g in grads:
        p.grad = torch.tensor([g], dtype=dtype)
        optimizer.step()
    return p[0].item()


def stored(dtype, values):
    return [torch.tensor(v, dtype=dtype).item() for v in values]


def adagrad_documented(start, grads, lr, eps=1e-10):
    p, total = start, 0.0
    for g in grads:
        total += g * g
        p -= lr * g / (math.sqrt(total) + eps)
    return p


def sgd_documented(start, grads, lr, momentum):
    p, buf = start, None
    for g in grads:
        buf = g if buf is None else momentum * buf + g
        p -= lr * buf
    return p


CASES = [
    ("Adagrad float16", torch.optim.Adagrad, torch.float16, 0.5, [0.1, 0.3], {"lr": 0.1}),
    ("Adagrad float64", torch.optim.Adagrad, torch.float64, 0.5, [0.5, 0.5], {"lr": 0.1}),
    ("SGD float64", torch.optim.SGD, torch.float64, 0.5, [0.3, 0.3], {"lr": 0.2, "momentum": 0.9}),
]


def scenario():
    shown, numbers, failures = [], [], []
    for name, cls, dtype, start, grads, hyper in CASES:
        try:
            expected = run(cls, dtype, start, grads, False, **hyper)
            actual = run(cls, dtype, start, grads, True, **hyper)
        except Exception as exc:  # no fused= keyword, or no fused cpu kernel, on this release
            text = str(exc).strip().splitlines()
            print(f"{name}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
            failures.append(exc)
            continue
        exact = stored(dtype, grads)
        reference = (adagrad_documented(start, exact, **hyper) if cls is torch.optim.Adagrad
                     else sgd_documented(start, exact, **hyper))
        print(f"{name}: float64 {reference!r}, for-loop {expected!r}, fused {actual!r}")
        if actual == expected:
            continue
        tolerance = 8 * torch.finfo(dtype).eps * max(abs(start), abs(expected), abs(actual))
        if math.isfinite(actual) and abs(actual - expected) <= tolerance:
            shown.append(name)
            numbers.append(f"{name} fused {actual!r} vs for-loop {expected!r}")
        else:
            print(f"({name}: the two differ by more than rounding: not this divergence)")
    if len(failures) == len(CASES):
        raise failures[0]
    return bool(shown), "; ".join(numbers) or "fused equals the for-loop step bit for bit"


def main():
    try:
        shows, numbers = scenario()
    except Exception as exc:  # a missing keyword or kernel on this release, never the divergence
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        return 3
    print(f"torch {torch.__version__}: {'shows it' if shows else 'does not show it'}: {numbers}")
    return 1 if shows else 0


if __name__ == "__main__":
    sys.exit(main())
