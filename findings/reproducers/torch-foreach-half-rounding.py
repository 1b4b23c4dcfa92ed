"""torch-foreach-half-rounding: foreach Adagrad/SGD in float16 round otherwise than the for-loop step (a few ulps apart).

torch's foreach steps in float16/bfloat16 round their intermediates otherwise than the for-loop steps:
_multi_tensor_adagrad stores -clr * grad in the dtype (torch._foreach_mul) before torch._foreach_addcdiv_,
where _single_tensor_adagrad divides and scales in one addcdiv_(grad, std, value=-clr); SGD's foreach
momentum step goes through torch._foreach_mul_ / torch._foreach_add_ (whose results on cpu are those of
the momentum 0.9 rounded to float16, 0.89990234375), the for-loop step through
buf.mul_(momentum).add_(grad). Both stay within the tolerance of a correct implementation; in
float32/float64 the two are bit for bit the same on cpu.

Compared, float16, foreach=True (actual) vs foreach=False (expected), bit for bit; the float64 value of
the documented step is printed for reference:
  Adagrad(lr=0.7), one step on [1.0] with gradient [0.7];
  SGD(lr=1, momentum=0.9), two steps on [1.0] with gradients [0.7], [0.3] (parameter and momentum buffer).
Shows it when an optimizer's two results differ, by at most 8 float16 ulps (rtol 2^-7): a rounding, not
some other divergence (a larger difference is reported as not this one).

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import math
import sys

import torch

DTYPE = torch.float16
RTOL = 2.0 ** -7  # 8 ulps of float16 (10 explicit mantissa bits)


def half(x):
    return torch.tensor(x, dtype=DTYPE).item()


def adagrad(foreach):
    p = torch.tensor([1.0], dtype=DTYPE)
    optimizer = torch.optim.Adagrad([p], lr=0.7, foreach=foreach)
    p.grad = torch.tensor([0.7], dtype=DTYPE)
    optimizer.step()
    return [p[0].item()]


def sgd(foreach):
    p = torch.tensor([1.0], dtype=DTYPE)
    optimizer = torch.optim.SGD([p], lr=1.0, momentum=0.9, foreach=foreach)
    for g in (0.7, 0.3):
        p.grad = torch.tensor([g], dtype=DTYPE)
        optimizer.step()
    return [p[0].item(), optimizer.state[p]["momentum_buffer"][0].item()]


def documented():
    g = half(0.7)
    adagrad_param = 1.0 - 0.7 * g / (math.sqrt(g * g) + 1e-10)
    g1, g2 = half(0.7), half(0.3)
    buf = 0.9 * g1 + g2
    return {"Adagrad": [adagrad_param], "SGD": [1.0 - g1 - buf, buf]}


def scenario():
    reference = documented()
    shown, other, numbers = [], [], []
    for name, run in (("Adagrad", adagrad), ("SGD", sgd)):
        expected, actual = run(False), run(True)
        print(f"{name}: float64 {reference[name]}, for-loop {expected}, foreach {actual}")
        if actual != expected:
            close = all(math.isfinite(a) and math.isfinite(e) and abs(a - e) <= RTOL * max(abs(a), abs(e))
                        for a, e in zip(actual, expected))
            (shown if close else other).append(name)
            numbers.append(f"{name} foreach {actual} vs for-loop {expected}")
    for name in other:
        print(f"({name}: the two differ by more than rounding: not this divergence)")
    return bool(shown), "; ".join(numbers) or "foreach equals the for-loop step bit for bit"


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
