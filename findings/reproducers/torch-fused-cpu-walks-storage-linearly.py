"""torch-fused-cpu-walks-storage-linearly: fused CPU Adagrad/SGD walk a strided parameter's storage from data_ptr() as if contiguous.

torch's fused CPU optimizer kernels (Adagrad(fused=True), SGD(fused=True): torch._fused_adagrad_,
torch._fused_sgd_) walk the parameter, its gradient and its state from data_ptr() as if they were
contiguous: on a parameter that is a strided view they update the wrong entries and write into the
storage around the view. The for-loop and foreach steps read the strides.

Compared (the spec case adagrad.yaml::dense-steps-on-a-strided-parameter, float32, cpu): the parameter
[[1, 2, 3], [4, 5, 6]] handed over as a view into a larger storage (offset 1, every second entry; the rest
of the storage holds -7.75), two dense steps with gradients [[3, 0.6, -3], [1, 0, 0.5]] and
[[4, 0.8, 4], [0, 2, 1.2]]:
  Adagrad(lr=1, fused=True) (documented result [[-0.8, 0.2, 3.2], [3, 4, 4.0769...]]), and
  SGD(lr=0.5, momentum=0.5, fused=True) on the same inputs;
each on the view (actual) vs the same optimizer on a contiguous copy (expected), exactly, and no entry of
the storage around the view may change. Shows it when the view's result is wrong AND equals the model of
the divergence exactly: the same fused step handed the contiguous tensor over the view's window of storage
(storage.as_strided(shape, contiguous strides, offset)) leaves the storage bit for bit as the run did.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch

DTYPE = torch.float32
SHAPE, STRIDES, OFFSET = (2, 3), (6, 2), 1  # offset 1, every second entry
SENTINEL = -7.75
PARAM = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
GRADS = [[[3.0, 0.6, -3.0], [1.0, 0.0, 0.5]], [[4.0, 0.8, 4.0], [0.0, 2.0, 1.2]]]
DOCUMENTED = {"Adagrad": [[-0.8, 0.2, 3.2], [3.0, 4.0, 4.0769230769230769]]}
CASES = [("Adagrad", torch.optim.Adagrad, {"lr": 1.0}),
         ("SGD", torch.optim.SGD, {"lr": 0.5, "momentum": 0.5})]


def run(cls, hyper, handed):
    """The storage and the parameter after two fused steps; ``handed``: "contiguous" (a copy of its own),
    "view" (the strided view) or "window" (the contiguous tensor over the view's window of storage)."""
    storage = torch.full((2 * (OFFSET + 12) + 8,), SENTINEL, dtype=DTYPE)
    view = storage.as_strided(SHAPE, STRIDES, OFFSET)
    view.copy_(torch.tensor(PARAM, dtype=DTYPE))
    if handed == "contiguous":
        p = torch.tensor(PARAM, dtype=DTYPE)
    elif handed == "view":
        p = view
    else:
        p = storage.as_strided(SHAPE, (3, 1), OFFSET)
    optimizer = cls([p], fused=True, **hyper)
    for g in GRADS:
        p.grad = torch.tensor(g, dtype=DTYPE)
        optimizer.step()
    return storage, p.detach().clone()


def short(t):
    return [[float(f"{v:.4g}") for v in row] for row in t.tolist()]


def outside_changed(storage):
    inside = torch.zeros(storage.numel(), dtype=torch.bool)
    inside.as_strided(SHAPE, STRIDES, OFFSET).fill_(True)
    return int((storage[~inside] != SENTINEL).sum())


def scenario():
    shown, numbers, failures = [], [], []
    for name, cls, hyper in CASES:
        try:
            _, expected = run(cls, hyper, "contiguous")
            storage, actual = run(cls, hyper, "view")
            model, _ = run(cls, hyper, "window")
        except Exception as exc:  # no fused= keyword, or no fused cpu kernel, on this release
            text = str(exc).strip().splitlines()
            print(f"{name}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
            failures.append(exc)
            continue
        if name in DOCUMENTED:
            print(f"{name}: documented {DOCUMENTED[name]}")
        changed = outside_changed(storage)
        print(f"{name}: expected (contiguous copy) {expected.tolist()}")
        print(f"{name}: actual (strided view)      {actual.tolist()}, "
              f"{changed} storage entries outside the view changed")
        wrong = changed > 0 or not torch.equal(expected, actual)
        if wrong and torch.equal(storage, model):
            shown.append(name)
            numbers.append(f"{name} on the view {short(actual)} vs {short(expected)}, "
                           f"{changed} entries outside the view written")
        elif wrong:
            print(f"({name}: wrong on the view, but not as the linear walk over the storage: not this divergence)")
            numbers.append(f"{name} wrong on the view, otherwise than the linear walk")
        else:
            numbers.append(f"{name} on the view equals the contiguous copy")
    if len(failures) == len(CASES):
        raise failures[0]
    return bool(shown), "; ".join(numbers)


def main():
    try:
        shows, numbers = scenario()
    except Exception as exc:  # a missing keyword or kernel on this release, never the divergence
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        return 3
    print(f"torch {torch.__version__}: {'shows it' if shows else 'does not show it'}: {numbers}")
    return 1 if shows else 0


if __name__ == "__main__":
    sys.exit(main())
