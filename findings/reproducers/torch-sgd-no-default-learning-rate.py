"""torch-sgd-no-default-learning-rate: torch.optim.SGD([p]) without lr raises instead of using the default 0.001.

torch.optim.SGD documents lr as optional with the default 1e-3. torch 2.1's SGD takes lr=required and
its constructor raises ValueError "parameter group didn't specify a value of required optimization
parameter lr"; later releases default it to 0.001.

Compared: SGD([p]) on p = [1.0] (float64), one step with the gradient 1. Expected (the documented default):
p = 1 - 0.001 = 0.999. Shown: the ValueError naming the required lr (only that exception counts).

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch


def main():
    try:
        p = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
        try:
            optimizer = torch.optim.SGD([p])
        except ValueError as exc:
            if "required optimization parameter lr" in str(exc):
                print(f"torch {torch.__version__}: shows it: SGD([p]) raises ValueError: {exc}")
                return 1
            raise
        p.grad = torch.ones(1, dtype=torch.float64)
        optimizer.step()
        actual = p.detach().item()
    except Exception as exc:  # a missing API on this release, never the divergence
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {str(exc)[:200]}")
        return 3
    agrees = "" if abs(actual - 0.999) <= 1e-12 else " -- a different value, another divergence"
    print(f"torch {torch.__version__}: does not show it: SGD([p]) steps with the default lr, p = {actual!r} "
          f"(expected 0.999){agrees}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
