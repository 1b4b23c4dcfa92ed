"""torch-foreach-adagrad-half-tensor-lr-internal-assert: foreach Adagrad with a tensor lr on a 0-d half-precision parameter hits an internal assert.

Adagrad(foreach=True) with the lr a 0-d tensor (documented: lr may be a Tensor) on a 0-d float16 or
bfloat16 parameter on cpu: torch 2.1 fails with "!needs_dynamic_casting<func_t>::check(iter) INTERNAL
ASSERT FAILED ... please report a bug to PyTorch" in torch._foreach_addcdiv_. With a float lr the same
step runs in bfloat16 and refuses float16 cleanly ("addcdiv_cpu_out" not implemented for 'Half'), and a
1-D parameter runs. Releases that step it give p = 1 - 1 * 1 / (sqrt(1) + 1e-10) = 0.

Compared: Adagrad([p], lr=torch.tensor(1.0), eps=1e-10, foreach=True) on the 0-d p = 1 with the gradient 1,
in float16 and in bfloat16. Shown: the INTERNAL ASSERT in either (only that counts; the clean "not
implemented" refusal, or any other error, is "cannot run" for that dtype).

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch


def step(dtype):
    """"asserts", or the stepped value."""
    p = torch.nn.Parameter(torch.ones((), dtype=dtype))
    optimizer = torch.optim.Adagrad([p], lr=torch.tensor(1.0), eps=1e-10, foreach=True)
    p.grad = torch.ones((), dtype=dtype)
    try:
        optimizer.step()
    except RuntimeError as exc:
        if "needs_dynamic_casting" in str(exc) and "INTERNAL ASSERT" in str(exc):
            return "asserts"
        raise
    return p.detach().item()


def main():
    seen = {}
    for dtype in (torch.float16, torch.bfloat16):
        try:
            seen[dtype] = step(dtype)
        except Exception as exc:  # a missing API, keyword or kernel on this release
            seen[dtype] = f"cannot run: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    said = "; ".join(f"{str(dtype).replace('torch.', '')}: {value}" for dtype, value in seen.items())
    if "asserts" in seen.values():
        print(f"torch {torch.__version__}: shows it: the step hits the INTERNAL ASSERT ({said})")
        return 1
    ran = [value for value in seen.values() if not isinstance(value, str)]
    if not ran:
        print(f"torch {torch.__version__}: cannot run: {said}")
        return 3
    agrees = "" if all(value == 0.0 for value in ran) else " -- a different value, another divergence"
    print(f"torch {torch.__version__}: does not show it: {said} (expected 0.0){agrees}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
