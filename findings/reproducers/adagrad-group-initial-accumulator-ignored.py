"""adagrad-group-initial-accumulator-ignored: torch.optim.Adagrad ignores a param group's own initial_accumulator_value.

torch's optimizer docs say a param group's options override the constructor's defaults, and
initial_accumulator_value is one of Adagrad's per-group options (it is kept in param_groups). But
Adagrad.__init__ (and, from 2.12, the lazy state of _init_group, which reads self.defaults) fills every
parameter's state_sum with the constructor's initial_accumulator_value.

Compared: Adagrad([{"params": [p], "initial_accumulator_value": 3.0}], lr=1) (constructor default 0)
with one sparse gradient 1.0 at index 0 of p = [1, 2]. Expected (the group's value used, float64):
state_sum = [3 + 1, 3] = [4, 3], p[0] = 1 - 1 / sqrt(4) = 0.5. Actual: torch's state_sum and p
(torch gives state_sum [1, 0], p[0] = 0). Tolerance 1e-12 (float64).

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import math
import sys

import torch

INIT, LR, EPS, G = 3.0, 1.0, 1e-10, 1.0


def scenario():
    p = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adagrad([{"params": [p], "initial_accumulator_value": INIT}], lr=LR, eps=EPS)
    print(f"param_groups[0]['initial_accumulator_value'] = {optimizer.param_groups[0]['initial_accumulator_value']}")
    p.grad = torch.sparse_coo_tensor([[0]], torch.tensor([G], dtype=torch.float64), (2,))
    optimizer.step()
    state_sum = optimizer.state[p]["sum"].tolist()
    param = p.detach().tolist()
    expected_sum = [INIT + G * G, INIT]
    expected_param = [1.0 - LR * G / (math.sqrt(INIT + G * G) + EPS), 2.0]
    print(f"expected (the group's initial_accumulator_value {INIT}): state_sum {expected_sum}, param {expected_param}")
    print(f"actual: state_sum {state_sum}, param {param}")
    close = all(abs(a - e) <= 1e-12 for a, e in zip(state_sum + param, expected_sum + expected_param))
    return not close, f"state_sum {state_sum}, param {param}; expected {expected_sum}, {expected_param}"


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
