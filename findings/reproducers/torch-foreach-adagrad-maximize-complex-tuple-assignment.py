"""torch-foreach-adagrad-maximize-complex-tuple-assignment: foreach Adagrad with maximize fails on complex parameters.

torch's optimizers take a complex parameter as the pairs of reals torch.view_as_real shows, and
Adagrad documents maximize. Adagrad(foreach=True, maximize=True) on a complex parameter fails in torch 2.2:
_multi_tensor_adagrad negates the gradients with torch._foreach_neg, which returns a tuple, and then
assigns their real views into it: TypeError "'tuple' object does not support item assignment". The
for-loop step runs. Releases that run it step p = (1+1j) with the gradient (1+1j) to
p + 1 * (1, 1) / (sqrt((1, 1)) + 1e-10) per real pair, (2+2j) up to 1e-10.

Compared: Adagrad([p], lr=1, eps=1e-10, maximize=True, foreach=True) on p = [1+1j] (complex128), one step
with the dense gradient [1+1j]. Shown: that TypeError (only it counts; any other error is "cannot run").

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch


def main():
    try:
        p = torch.nn.Parameter(torch.tensor([1 + 1j], dtype=torch.complex128))
        optimizer = torch.optim.Adagrad([p], lr=1.0, eps=1e-10, maximize=True, foreach=True)
        p.grad = torch.tensor([1 + 1j], dtype=torch.complex128)
        try:
            optimizer.step()
        except TypeError as exc:
            if "does not support item assignment" in str(exc):
                print(f"torch {torch.__version__}: shows it: foreach Adagrad with maximize on a complex parameter "
                      f"raises TypeError: {exc}")
                return 1
            raise
        actual = complex(p.detach()[0])
    except Exception as exc:  # a missing API, keyword or kernel on this release
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return 3
    agrees = "" if abs(actual - (2 + 2j)) <= 1e-9 else " -- a different value, another divergence"
    print(f"torch {torch.__version__}: does not show it: the step runs, p = {actual!r} (expected (2+2j)){agrees}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
