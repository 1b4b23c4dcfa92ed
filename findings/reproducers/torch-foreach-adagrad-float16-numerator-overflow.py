"""torch-foreach-adagrad-float16-numerator-overflow: foreach Adagrad in float16 overflows to -inf where the for-loop step gives -10000.

torch's foreach Adagrad step (_multi_tensor_adagrad) stores the numerator -clr * grad in the parameter's
dtype (torch._foreach_mul) before torch._foreach_addcdiv_ divides it by std; in float16 that product
overflows once |grad| * clr > 65504. The documented step, param - clr * grad / (sqrt(state_sum) + eps),
and torch's for-loop step (addcdiv_(grad, std, value=-clr), which divides first) stay finite.

Compared: Adagrad(lr=1e4) (eps 1e-10, torch's default), one step on the float16 parameter [1.0] with the
gradient [8.0] (8 * 1e4 = 80000 > 65504): foreach=True (actual) vs foreach=False (expected; the documented
value 1 - 1e4 * 8 / 8 = -9999 is -10000 in float16). Shows it when the foreach result is inf or NaN where
the for-loop result is finite.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import math
import sys

import torch

LR, GRAD, START = 1e4, 8.0, 1.0


def step(foreach):
    p = torch.tensor([START], dtype=torch.float16)
    optimizer = torch.optim.Adagrad([p], lr=LR, foreach=foreach)
    p.grad = torch.tensor([GRAD], dtype=torch.float16)
    optimizer.step()
    return p[0].item()


def scenario():
    documented = START - LR * GRAD / (math.sqrt(GRAD * GRAD) + 1e-10)
    expected = step(foreach=False)
    actual = step(foreach=True)
    print(f"documented step (float64): {documented!r}")
    print(f"expected (foreach=False, float16): {expected!r}")
    print(f"actual (foreach=True, float16): {actual!r}")
    shows = math.isfinite(expected) and not math.isfinite(actual)
    if not shows and actual != expected:
        print("(the two differ, but not by an overflow: not this divergence)")
    return shows, f"foreach gives {actual!r}, the for-loop step {expected!r}"


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
