"""torch-adagrad-sparse-complex: Adagrad's sparse path squares a complex gradient instead of treating it as pairs of reals.

torch's optimizer docs (Complex Numbers) say the optimizers handle a complex parameter as a pair of real
parameters (the dense path does: _view_as_real). Adagrad's sparse branch (grad.pow(2), std.sqrt_(),
no view_as_real) squares the complex gradient values instead: the imaginary part is not updated as the
real one.

Compared: Adagrad(lr=1, eps=1e-10), one step, on the complex128 parameter [1+1j] with the sparse gradient
1+1j at index 0 (actual) vs the same step on the pair of reals (1, 1) with gradient (1, 1), computed in
float64 (expected: each part 1 - 1 / (sqrt(1) + 1e-10) ~ 1e-10, so ~0+0j); the dense gradient's step is
printed too. Tolerance 1e-6 per part (torch gives 0+1j: the imaginary part is off by 1).

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import math
import sys

import torch

LR, EPS = 1.0, 1e-10


def step(sparse):
    p = torch.tensor([1 + 1j], dtype=torch.complex128, requires_grad=True)
    optimizer = torch.optim.Adagrad([p], lr=LR, eps=EPS)
    g = torch.tensor([1 + 1j], dtype=torch.complex128)
    p.grad = torch.sparse_coo_tensor([[0]], g, (1,)) if sparse else g
    optimizer.step()
    return p.detach()[0].item()


def scenario():
    part = 1.0 - LR * 1.0 / (math.sqrt(1.0 * 1.0) + EPS)  # each real part: state 1, std 1 + eps
    expected = complex(part, part)
    actual = step(sparse=True)
    print(f"expected (pairs of reals, float64): {expected}")
    try:  # for information only: the documented behaviour, on the dense path
        print(f"dense gradient 1+1j: {step(sparse=False)}")
    except Exception as exc:
        print(f"dense gradient 1+1j: {type(exc).__name__}: {exc}")
    print(f"actual (sparse gradient 1+1j): {actual}")
    off = max(abs(actual.real - expected.real), abs(actual.imag - expected.imag))
    return off > 1e-6, f"sparse step gives {actual:.6g}, expected {expected:.6g} (largest part difference {off:.3g})"


def main():
    try:
        shows, numbers = scenario()
    except Exception as exc:  # a missing API or kernel on this release, never the divergence
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {exc}")
        return 3
    print(f"torch {torch.__version__}: {'shows it' if shows else 'does not show it'}: {numbers}")
    return 1 if shows else 0


if __name__ == "__main__":
    sys.exit(main())
