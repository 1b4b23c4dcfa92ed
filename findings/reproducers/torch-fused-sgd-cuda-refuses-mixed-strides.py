"""torch-fused-sgd-cuda-refuses-mixed-strides: fused CUDA SGD raises check_fast_path_restrictions on a strided parameter with a contiguous gradient.

torch's fused CUDA SGD (SGD(fused=True), torch._fused_sgd_) raises RuntimeError 'Expected
at::native::check_fast_path_restrictions({params, grads, momentum_buffer_list}) to be true' when the
parameter is a view whose strides differ from its gradient's (a strided parameter, a contiguous gradient),
where the same step on contiguous copies runs; the for-loop and foreach steps take them. Seen on an NVIDIA
H200 with torch 2.11.0+cu130 (float16, bfloat16 and float64, momentum 0.5).

Compared, cuda, float64: SGD(lr=0.5, momentum=0.5, fused=True), two dense steps on the parameter
[[1, 2, 3], [4, 5, 6]] handed over as a view into a larger storage (offset 1, every second entry), with
contiguous gradients [[3, 0.6, -3], [1, 0, 0.5]] and [[4, 0.8, 4], [0, 2, 1.2]] (actual) vs the same
optimizer on a contiguous copy (expected), exactly. Shows it when a step on the view raises RuntimeError
naming check_fast_path_restrictions; any other error, or no CUDA device, is "cannot run".

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch

DTYPE = torch.float64
SHAPE, STRIDES, OFFSET = (2, 3), (6, 2), 1  # offset 1, every second entry
PARAM = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
GRADS = [[[3.0, 0.6, -3.0], [1.0, 0.0, 0.5]], [[4.0, 0.8, 4.0], [0.0, 2.0, 1.2]]]
FRAGMENT = "check_fast_path_restrictions"


def run(on_view):
    if on_view:
        storage = torch.full((2 * (OFFSET + 12) + 8,), -7.75, dtype=DTYPE, device="cuda")
        p = storage.as_strided(SHAPE, STRIDES, OFFSET)
        p.copy_(torch.tensor(PARAM, dtype=DTYPE))
    else:
        p = torch.tensor(PARAM, dtype=DTYPE, device="cuda")
    optimizer = torch.optim.SGD([p], lr=0.5, momentum=0.5, fused=True)
    for g in GRADS:
        p.grad = torch.tensor(g, dtype=DTYPE, device="cuda")
        optimizer.step()
    return p.detach().cpu()


def main():
    if not torch.cuda.is_available():
        print(f"torch {torch.__version__}: cannot run: no CUDA device (torch.cuda.is_available() is False)")
        return 3
    try:
        expected = run(on_view=False)
        print(f"expected (contiguous copy): {expected.tolist()}")
    except Exception as exc:  # no fused= keyword, or no fused CUDA kernel for the dtype, on this release
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        return 3
    try:
        actual = run(on_view=True)
    except RuntimeError as exc:
        text = str(exc).strip().splitlines()
        message = text[0] if text else ""
        if FRAGMENT in str(exc):
            print(f"actual (strided view): RuntimeError: {message}")
            print(f"torch {torch.__version__}: shows it: the step on the strided parameter raises "
                  f"RuntimeError: {message[:200]}")
            return 1
        print(f"torch {torch.__version__}: cannot run: RuntimeError: {message}")
        return 3
    except Exception as exc:
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        return 3
    print(f"actual (strided view): {actual.tolist()}")
    if not torch.equal(actual, expected):
        print("(the step runs, but its values differ from the contiguous copy's: not this divergence)")
    print(f"torch {torch.__version__}: does not show it: the step on the strided parameter runs "
          f"({actual.tolist()} vs {expected.tolist()} on a contiguous copy)")
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # never an uncaught exception: exit 1 means the divergence
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        code = 3
    sys.exit(code)
