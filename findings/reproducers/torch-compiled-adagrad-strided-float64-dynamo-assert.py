"""torch-compiled-adagrad-strided-float64-dynamo-assert: torch.compile of Adagrad's step fails in Dynamo (AssertionError: 1 != 2) on a strided float64 parameter.

torch's Adagrad step under torch.compile fails in Dynamo on a float64 parameter that is a strided view
into a larger storage: AssertionError: 1 != 2, reached from torch/_dynamo/variables/optimizer.py
(_set_capturable) in torch/fx/experimental/symbolic_shapes.py (_create_symbolic_sizes_strides_storage_offset,
len(dynamic_sizes) != dim) while Dynamo fakes the parameter (a view of a 1-D storage) and then its gradient,
itself a view of a 2-D tensor. Recorded in adagrad.yaml, case dense-steps-on-a-strided-parameter, backends
[compiled], dtypes [float64], kind error, torch "<2.13".

Compared (that spec case, float64, cpu, as the suite's compiled backend runs it: Adagrad(lr=1,
foreach=False) with its step() under torch.compile(dynamic=True), Inductor): the parameter
[[1, 2, 3], [4, 5, 6]] handed over as a view into a larger storage (offset 1, every second entry; the rest
holds -7.75), two dense steps with gradients [[3, 0.6, -3], [1, 0, 0.5]] and [[4, 0.8, 4], [0, 2, 1.2]],
each handed over as the suite hands a float64 gradient: a view (reshape to its own shape) of the tensor
made from the data (conformance.core.tensors.to_torch: torch.from_numpy(...).reshape(shape); in float32
its .to(dtype) copies, so the gradient is no view there -- why only float64 shows it; with a gradient that
is no view torch 2.9.0 compiles the step). Expected: the documented result computed in float64 (param
[[-0.8, 0.2, 3.2], [3, 4, 4.076923...]] but for eps 1e-10, state_sum [[25, 1, 25], [1, 4, 1.69]]; within
1e-12), no entry of the storage around the view changed.
Shows it when compiling raises and that AssertionError ("1 != 2") is the exception, in its cause/context
chain or in its message; any other failure (torch.compile missing, another compile error, no graph
compiled) is "cannot run". A compiled step that gives other values is reported as not this divergence.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import contextlib
import math
import os
import sys
import tempfile

import torch

SHAPE, STRIDES, OFFSET = (2, 3), (6, 2), 1  # offset 1, every second entry
SENTINEL = -7.75
PARAM = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
GRADS = [[[3.0, 0.6, -3.0], [1.0, 0.0, 0.5]], [[4.0, 0.8, 4.0], [0.0, 2.0, 1.2]]]
EPS = 1e-10  # torch's default


def documented():
    """The documented algorithm in float64, entry by entry (lr 1, eps 1e-10): (param, state_sum); the spec's
    golden values [[-0.8, 0.2, 3.2], [3, 4, 4.0769...]] and [[25, 1, 25], [1, 4, 1.69]] leave eps out."""
    param = [row[:] for row in PARAM]
    total = [[0.0] * 3 for _ in range(2)]
    for g in GRADS:
        for i in range(2):
            for j in range(3):
                total[i][j] += g[i][j] * g[i][j]
                param[i][j] -= g[i][j] / (math.sqrt(total[i][j]) + EPS)
    return param, total


EXPECTED_PARAM, EXPECTED_SUM = documented()
ASSERTION = "1 != 2"


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


def scenario():
    import torch._dynamo
    import torch._inductor.config

    if hasattr(torch._inductor.config, "compile_threads"):
        torch._inductor.config.compile_threads = 1  # no pool of compile workers (seconds on a small machine)
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    storage = torch.full((2 * (OFFSET + 12) + 8,), SENTINEL, dtype=torch.float64)
    p = storage.as_strided(SHAPE, STRIDES, OFFSET)
    p.copy_(torch.tensor(PARAM, dtype=torch.float64))
    optimizer = torch.optim.Adagrad([p], lr=1.0, foreach=False)
    compiled = torch.compile(step, dynamic=True)
    before = counters["stats"]["unique_graphs"]
    for g in GRADS:
        data = torch.tensor(g, dtype=torch.float64)
        p.grad = data.reshape(SHAPE)  # a view of data (its _base), as the suite hands a float64 gradient
        compiled(optimizer)
    if counters["stats"]["unique_graphs"] == before:
        raise RuntimeError("torch.compile compiled no graph: the step ran eagerly")
    return storage, p.detach().clone(), optimizer.state[p]["sum"].clone()


def the_assertion(exc):
    """Whether ``exc`` is Dynamo's AssertionError 1 != 2: itself, down its causes, or named in a message."""
    seen = []
    while exc is not None and len(seen) < 16 and all(exc is not e for e in seen):
        text = str(exc)
        if isinstance(exc, AssertionError) and ASSERTION in text:
            return True
        if f"AssertionError: {ASSERTION}" in text:
            return True
        seen.append(exc)
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
    return False


def main():
    logged = []
    try:
        with stderr_captured(logged):
            storage, param, state_sum = scenario()
    except Exception as exc:
        text = str(exc).strip().splitlines()
        message = f"{type(exc).__name__}: {text[0] if text else ''}"
        if the_assertion(exc):
            print(f"actual: compiling the step raises {message}")
            print(f"torch {torch.__version__}: shows it: torch.compile of Adagrad's step on the strided float64 "
                  f"parameter raises {message[:200]}")
            return 1
        for line in logged[-5:]:
            print(f"  (stderr) {line}")
        print(f"torch {torch.__version__}: cannot run: {message}")
        return 3
    inside = torch.zeros(storage.numel(), dtype=torch.bool)
    inside.as_strided(SHAPE, STRIDES, OFFSET).fill_(True)
    outside = int((storage[~inside] != SENTINEL).sum())
    got_param, got_sum = param.tolist(), state_sum.tolist()
    print(f"expected: param {EXPECTED_PARAM}, state_sum {EXPECTED_SUM}, storage outside the view unchanged")
    print(f"actual (compiled): param {got_param}, state_sum {got_sum}, {outside} storage entries outside changed")
    pairs = ((got_param, EXPECTED_PARAM), (got_sum, EXPECTED_SUM))
    right = outside == 0 and all(abs(a - b) <= 1e-12 for got, want in pairs
                                 for row_a, row_b in zip(got, want) for a, b in zip(row_a, row_b))
    if not right:
        print("(it compiles, but its values are not the documented ones: not this divergence)")
    shown = [[round(v, 6) for v in row] for row in got_param]
    print(f"torch {torch.__version__}: does not show it: the step compiles on the strided float64 parameter "
          f"({'the documented values' if right else 'other values'}: param {shown})")
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # never an uncaught exception: exit 1 means the divergence
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        code = 3
    sys.exit(code)
