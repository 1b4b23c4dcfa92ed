"""torch-adagrad-duplicates-cancel-half-precision: float16 Adagrad turns a cancelling sparse gradient into NaN.

The adagrad spec's case duplicates-cancel-half-precision: param [1, 2, 3] in float16, one sparse gradient
with the duplicates 2.0 and -2.0 at index 0, Adagrad(lr=1) (eps defaults to 1e-10). Coalesced, the
gradient is a specified 0 at index 0: state_sum += 0, std = sqrt(0) + 1e-10, param -= 0 / std, so the
parameter stays [1, 2, 3] (the golden value; the float64 computation). In float16, sqrt(0) + 1e-10 rounds
to 0 (1e-10 is below the smallest subnormal), so torch computes 0 / 0 = NaN into param[0].

Compared, exactly: torch's parameter after the step vs the spec's golden param [1.0, 2.0, 3.0].

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch

EXPECTED = [1.0, 2.0, 3.0]  # specs/adagrad.yaml, duplicates-cancel-half-precision


def scenario():
    p = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16, requires_grad=True)
    optimizer = torch.optim.Adagrad([p], lr=1.0)
    p.grad = torch.sparse_coo_tensor(torch.tensor([[0, 0]]), torch.tensor([2.0, -2.0], dtype=torch.float16), (3,))
    optimizer.step()
    actual = p.detach().tolist()
    print(f"float16 Adagrad(lr=1), sparse gradient [2, -2] at index 0: param {actual}, "
          f"state_sum {optimizer.state[p]['sum'].tolist()}; expected param {EXPECTED}")
    return actual != EXPECTED, f"param {actual}, expected {EXPECTED}"


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
