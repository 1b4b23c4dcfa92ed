"""torch-foreach-adagrad-half-tensor-lr-internal-assert: foreach Adagrad on float16 with a tensor lr hits an internal assert.

torch 2.1 has no float16 addcdiv on CPU: Adagrad(foreach=True) on a float16 parameter with a float lr
refuses it cleanly (RuntimeError "addcdiv_cpu_out" not implemented for 'Half'). With the lr a 0-d tensor
(documented: lr may be a Tensor) the same step fails with "!needs_dynamic_casting<func_t>::check(iter)
INTERNAL ASSERT FAILED ... please report a bug to PyTorch" in torch._foreach_addcdiv_. Releases with the
kernel step it: p = 1 - 1 * 1 / (sqrt(1) + 1e-10) = 0 in float16.

Compared: Adagrad([p], lr=torch.tensor(1.0), eps=1e-10, foreach=True) on the 0-d float16 p = 1 with the
gradient 1. Shown: the INTERNAL ASSERT (only that counts; the clean "not implemented" refusal, or any other
error, is "cannot run").

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch


def main():
    try:
        p = torch.nn.Parameter(torch.ones((), dtype=torch.float16))
        optimizer = torch.optim.Adagrad([p], lr=torch.tensor(1.0), eps=1e-10, foreach=True)
        p.grad = torch.ones((), dtype=torch.float16)
        try:
            optimizer.step()
        except RuntimeError as exc:
            if "needs_dynamic_casting" in str(exc) and "INTERNAL ASSERT" in str(exc):
                print(f"torch {torch.__version__}: shows it: {str(exc).splitlines()[0][:160]}")
                return 1
            raise
        actual = p.detach().item()
    except Exception as exc:  # a missing API, keyword or kernel on this release
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return 3
    agrees = "" if actual == 0.0 else " -- a different value, another divergence"
    print(f"torch {torch.__version__}: does not show it: the step runs, p = {actual!r} (expected 0.0){agrees}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
