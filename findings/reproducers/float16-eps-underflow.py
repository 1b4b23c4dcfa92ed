"""float16-eps-underflow: torch's float16 Adagrad gives NaN/inf for a zero or tiny sparse gradient entry (eps rounds to 0).

torch's optimizers keep their state in the parameter's dtype. In float16, Adagrad's
std = sqrt(state_sum) + eps rounds to 0 when eps (default 1e-10) is below float16's smallest subnormal
(~6e-8), and g**2 underflows to 0 for |g| < ~2.4e-4, so a specified zero gradient entry gives 0/0 = NaN
and a tiny one g/0 = inf, where the float64 reference stays finite.

Compared: one torch.optim.Adagrad(lr=0.01) step (eps 1e-10, sparse gradient, float16 parameter [1, 2])
vs the float64 step on the same float16 values: (a) gradient 0.0 at index 0 (float64: param stays 1.0);
(b) gradient 1e-4 at index 0 (float16 0.00010001659393310547; float64: state 1.0003e-8,
param 1 - 0.01 * g / (|g| + 1e-10) ~ 0.99). Shown: a non-finite parameter where the float64 result is
finite, in either case.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import math
import sys

import torch

LR, EPS = 0.01, 1e-10
PARAM = [1.0, 2.0]


def torch_step(g):
    p = torch.tensor(PARAM, dtype=torch.float16, requires_grad=True)
    optimizer = torch.optim.Adagrad([p], lr=LR)  # eps defaults to 1e-10
    p.grad = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.tensor([g], dtype=torch.float16), (2,))
    optimizer.step()
    return p.detach().tolist(), optimizer.state[p]["sum"].tolist()


def float64_step(g):
    g = torch.tensor(g, dtype=torch.float16).item()  # the gradient as float16 holds it
    state = g * g
    return [PARAM[0] - LR * g / (math.sqrt(state) + EPS), PARAM[1]], [state, 0.0]


def scenario():
    numbers, shows = [], False
    for label, g in (("(a) zero", 0.0), ("(b) tiny", 1e-4)):
        (param, state), (ref_param, ref_state) = torch_step(g), float64_step(g)
        print(f"{label} gradient {g} at index 0: float16 param {param}, state_sum {state}; "
              f"float64 param {ref_param}, state_sum {ref_state}")
        nonfinite = not all(math.isfinite(v) for v in param) and all(math.isfinite(v) for v in ref_param)
        shows |= nonfinite
        numbers.append(f"{label} g={g}: param[0] {param[0]!r} vs float64 {ref_param[0]:.6g}")
    return shows, "; ".join(numbers)


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
