"""torch-adagrad-add-param-group-keyerror: Adagrad raises KeyError: 'sum' at the step after add_param_group.

torch's Adagrad before 2.12 makes each parameter's state ('step', 'sum') in __init__ only, and its
_init_group reads state['sum'] without making it, so a parameter added by Optimizer.add_param_group
(documented for adding parameters to a running optimizer, e.g. unfreezing layers) raises
KeyError: 'sum' at the next step (pytorch#53712). Releases whose _init_group makes the state lazily run it.

Compared: Adagrad([a], lr=1) steps once with a sparse gradient for a; then add_param_group({"params": [b]})
and a step with the sparse gradient 1.0 for b. Expected: the step runs and b = 1 - 1 / (sqrt(1) + 1e-10)
(float64, tolerance 1e-12; a step that runs is "does not show it", a different value is said on the
verdict line). Shown: the step raises KeyError('sum') (only that exception counts as the divergence;
any other is "cannot run").

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import math
import sys

import torch

LR, EPS = 1.0, 1e-10


def sparse_one(size=1):
    return torch.sparse_coo_tensor([[0]], torch.tensor([1.0], dtype=torch.float64), (size,))


def main():
    try:
        a = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
        b = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
        optimizer = torch.optim.Adagrad([a], lr=LR, eps=EPS)
        a.grad = sparse_one()
        optimizer.step()
        optimizer.add_param_group({"params": [b]})
        b.grad = sparse_one()
        try:
            optimizer.step()
        except KeyError as exc:
            if exc.args == ("sum",):
                print("step after add_param_group raised KeyError('sum')")
                print(f"torch {torch.__version__}: shows it: the step after add_param_group raises KeyError: 'sum'")
                return 1
            raise
        expected = 1.0 - LR * 1.0 / (math.sqrt(1.0) + EPS)
        actual = b.detach().item()
        print(f"expected b after its first step (float64): {expected!r}; actual: {actual!r}")
    except Exception as exc:  # a missing API or kernel on this release, never the divergence
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {exc}")
        return 3
    # a step that runs but gives another value is not this finding (a KeyError): said, and exit 0
    agrees = "" if abs(actual - expected) <= 1e-12 else " -- a different value, another divergence"
    print(f"torch {torch.__version__}: does not show it: the step after add_param_group runs, b = {actual!r} "
          f"(expected {expected!r}){agrees}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
