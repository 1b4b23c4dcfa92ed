"""torch-compiled-sgd-momentum-dynamo-index-error: torch.compile of SGD's step with momentum fails in Dynamo.

An SGD step with momentum under torch.compile (what the compiled backend runs: the step of the
optimizer's class in a function compiled with dynamic=True, Inductor) should equal the eager step. In
torch 2.1 and 2.2 Dynamo fails while tracing _single_tensor_sgd (``buf = momentum_buffer_list[i]``):
InternalTorchDynamoError "list index out of range". Releases that compile it give the eager value.

Compared: SGD([p], lr=0.5, momentum=0.9, nesterov=True) on p = [1, 2] (float32), two steps with the dense
gradient [1, 1]. Expected (by hand, nesterov: b1 = g, d1 = g + 0.9 b1 = 1.9; b2 = 0.9 + 1 = 1.9,
d2 = 1 + 0.9 * 1.9 = 2.71): p = [1, 2] - 0.5 * (1.9 + 2.71) = [-1.305, -0.305]. Shown: an exception whose
message says "list index out of range" from Dynamo (only that counts; any other is "cannot run").

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch


def step(optimizer):
    return optimizer.step()


def main():
    try:
        p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
        optimizer = torch.optim.SGD([p], lr=0.5, momentum=0.9, nesterov=True)
        compiled = torch.compile(step, dynamic=True)
        for _ in range(2):
            p.grad = torch.ones(2)
            try:
                compiled(optimizer)
            except Exception as exc:
                if "list index out of range" in str(exc) and "Dynamo" in type(exc).__name__:
                    print(f"torch {torch.__version__}: shows it: torch.compile of SGD's nesterov step raises "
                          f"{type(exc).__name__}: list index out of range")
                    return 1
                raise
        actual = p.detach().tolist()
    except Exception as exc:  # a missing API or compiler on this release, never the divergence
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return 3
    expected = [-1.305, -0.305]
    agrees = "" if max(abs(a - e) for a, e in zip(actual, expected)) <= 1e-5 else " -- a different value, another divergence"
    print(f"torch {torch.__version__}: does not show it: the compiled step runs, p = {actual} (expected {expected}){agrees}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
