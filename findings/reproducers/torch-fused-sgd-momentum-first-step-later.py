"""torch-fused-sgd-momentum-first-step-later: fused SGD with momentum raises TypeError when a parameter takes its first step later than another.

torch's fused SGD with momentum (SGD(momentum>0, fused=True) on cpu) raises TypeError ('expected Tensor as
element 1 in argument 2, but got NoneType') at the step where one parameter takes its first step while
another already has a momentum buffer (_fused_sgd makes the buffers only when every one is missing, and
hands None to torch._fused_sgd_). The for-loop and foreach steps create the new buffer.

Compared: SGD([a, b], lr=1, momentum=0.9, fused=True) on a = b = [1.0] (float32), a gradient [1.0] for a
only at step 1, then [1.0] for both at step 2. Expected (the documented step, what foreach=False gives):
a = 1 - 1 - 1.9 = -1.9, b = 1 - 1 = 0.0, no error. Shows it when the second step raises TypeError whose
message says it got NoneType; any other error is "cannot run".

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch


def setup(**keywords):
    a, b = torch.tensor([1.0]), torch.tensor([1.0])
    optimizer = torch.optim.SGD([a, b], lr=1.0, momentum=0.9, **keywords)
    a.grad = torch.tensor([1.0])
    optimizer.step()  # b has no gradient: a gets its momentum buffer, b none
    a.grad, b.grad = torch.tensor([1.0]), torch.tensor([1.0])
    return optimizer, a, b


def main():
    try:
        loop, la, lb = setup(foreach=False)
        loop.step()
        expected = [la.item(), lb.item()]
        print(f"expected (foreach=False): a {expected[0]!r}, b {expected[1]!r}")
        optimizer, a, b = setup(fused=True)  # step 1: no buffer yet, nothing mixed
    except Exception as exc:  # no fused= keyword, or no fused cpu kernel, on this release
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        return 3
    try:
        optimizer.step()  # b's first step, a's second
    except TypeError as exc:
        text = str(exc).strip().splitlines()
        message = text[0] if text else ""
        if "NoneType" in message:
            print(f"actual (fused=True): TypeError: {message}")
            print(f"torch {torch.__version__}: shows it: the second step raises TypeError: {message}")
            return 1
        print(f"torch {torch.__version__}: cannot run: TypeError: {message}")
        return 3
    except Exception as exc:
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        return 3
    actual = [a.item(), b.item()]
    print(f"actual (fused=True): a {actual[0]!r}, b {actual[1]!r}")
    if actual != expected:
        print("(the step runs, but its values differ from the for-loop step's: not this divergence)")
    print(f"torch {torch.__version__}: does not show it: the second step runs: a {actual[0]!r}, b {actual[1]!r} "
          f"(for-loop a {expected[0]!r}, b {expected[1]!r})")
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # never an uncaught exception: exit 1 means the divergence
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {exc}")
        code = 3
    sys.exit(code)
