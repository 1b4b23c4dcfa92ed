"""torch-compiled-adagrad-float32-learning-rate: Adagrad's step under torch.compile moves a float64 parameter by lr rounded to float32.

torch's Adagrad step under torch.compile computes the effective learning rate
clr = lr / (1 + (step - 1) * lr_decay) from the float32 step tensor (torch/optim/adagrad.py,
_single_tensor_adagrad: _get_value(step_t) returns the tensor while compiling, not step_t.item()), so a
float64 parameter moves by lr rounded to float32; eagerly clr is a Python float, as the documented
algorithm has it.

Compared, float64, cpu: Adagrad(lr=8.31, eps=1e-6, foreach=False), one step on [-1.0] with the gradient
[2.875], its step() under torch.compile(dynamic=True) (Inductor; as the suite's compiled backend runs it)
(actual) vs the same step run eagerly (expected: -1 - 8.31 * 2.875 / (2.875 + 1e-6) = -9.309997109566224),
and vs eager with lr = float32(8.31) = 8.310000419616699 (the divergence's model: -9.309997529182775).
Shows it when the compiled result is within 16 float64 ulps of the model and not of the eager result
(relative error 4.5e-8 here, float32's roundoff); a compiled result that is neither is reported as not
this divergence. A compile that fails, or that compiles no graph, is "cannot run".

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import contextlib
import os
import sys
import tempfile

import torch

LR, EPS, START, GRAD = 8.31, 1e-6, -1.0, 2.875
ULPS = 16 * 2.0 ** -52


@contextlib.contextmanager
def stderr_captured(lines):
    """What torch writes to file descriptor 2 (its logs, the C++ compiler's) kept in ``lines``, not shown."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines.extend(capture.read().decode(errors="replace").splitlines())


def step(optimizer):
    return optimizer.step()


def run(stepper, lr):
    p = torch.tensor([START], dtype=torch.float64)
    optimizer = torch.optim.Adagrad([p], lr=lr, eps=EPS, foreach=False)
    p.grad = torch.tensor([GRAD], dtype=torch.float64)
    stepper(optimizer)
    return p[0].item()


def close(a, b):
    return abs(a - b) <= ULPS * max(abs(a), abs(b))


def compiled_run():
    import torch._dynamo
    import torch._inductor.config

    if hasattr(torch._inductor.config, "compile_threads"):
        torch._inductor.config.compile_threads = 1  # no pool of compile workers (seconds on a small machine)
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    before = counters["stats"]["unique_graphs"]
    actual = run(torch.compile(step, dynamic=True), LR)
    if counters["stats"]["unique_graphs"] == before:
        raise RuntimeError("torch.compile compiled no graph: the step ran eagerly")
    return actual


def main():
    expected = run(step, LR)
    lr32 = torch.tensor(LR, dtype=torch.float32).item()
    model = run(step, lr32)
    print(f"expected (eager, lr {LR!r}): {expected!r}")
    print(f"the divergence's model (eager, lr float32(8.31) = {lr32!r}): {model!r}")
    logged = []
    try:
        with stderr_captured(logged):
            actual = compiled_run()
    except Exception as exc:  # torch.compile missing or failing on this release/Python: not the divergence
        for line in logged[-5:]:
            print(f"  (stderr) {line}")
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        return 3
    print(f"actual (torch.compile(step, dynamic=True)): {actual!r}")
    numbers = f"compiled {actual!r}, eager {expected!r}, eager with lr float32(8.31) {model!r}"
    if close(actual, expected):
        print(f"torch {torch.__version__}: does not show it: {numbers}")
        return 0
    if close(actual, model):
        print(f"torch {torch.__version__}: shows it: {numbers}")
        return 1
    print("(the compiled step differs from eager, but not by the learning rate in float32: not this divergence)")
    print(f"torch {torch.__version__}: does not show it: {numbers}")
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # never an uncaught exception: exit 1 means the divergence
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        code = 3
    sys.exit(code)
