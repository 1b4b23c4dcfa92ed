"""What torch does wrong, handed to torch: a script that imports only torch (no suite) and shows a divergence
of stock torch's that a generated property found -- the example, the result on contiguous copies (expected)
and on the views (actual), torch's version and the machine -- ready to paste into an upstream issue.

Written for the layout-invariant property's examples on torch's own optimizer classes (the coo backend's
for-loop step, foreach, fused): ``reports/torch-reproducers/<item>.py``; the script exits 1 while torch
still shows it, 0 once fixed, 3 when the torch running it cannot run the example at all (the protocol of
``findings/reproducers/``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from conformance.core.layouts import Layout
from conformance.core.tensors import CooArray
from conformance.ops.optimizers.inputs import OptimizerInputs

TORCH_REPRODUCERS = "torch-reproducers"  # the folder under reports/

_PLACE = '''
def placed(values, kind, offset=0, step=1):
    """values (contiguous) copied into a view of a larger storage: "strided" (an offset, every step-th entry
    of the last dim), "transposed" (dims reversed in memory) or "contiguous"."""
    shape = tuple(values.shape)
    if kind == "transposed" and values.dim() >= 2:
        view = torch.empty(shape[::-1], dtype=values.dtype).permute(*reversed(range(values.dim())))
    elif kind == "strided":
        storage = torch.full((offset + max(values.numel(), 1) * step * 2 + 8,), -7.75, dtype=values.dtype)
        strides, running = [], step
        for size in reversed(shape):
            strides.append(running)
            running *= max(size, 1)
        view = storage.as_strided(shape, tuple(reversed(strides)), offset)
    else:
        view = torch.empty(shape, dtype=values.dtype)
    view.copy_(values)
    return view
'''


def torch_optimizer(optimizer_class: Any) -> tuple[type, dict] | None:
    """(torch's optimizer class, the constructor keywords that select its path) that ``optimizer_class``
    runs, or None when it is not one of torch.optim's."""
    keywords = dict(getattr(optimizer_class, "torch_keywords", {}) or {})
    for cls in getattr(optimizer_class, "__mro__", ()):
        if cls.__module__.startswith("torch.optim") and cls is not torch.optim.Optimizer:
            return cls, keywords
    return None


def _tensor(values: np.ndarray, dtype: str) -> str:
    return f"torch.tensor({np.asarray(values).tolist()!r}, dtype=torch.{dtype})"


def _grad(grad: Any, dtype: str) -> str:
    if isinstance(grad, CooArray):
        return f"torch.sparse_coo_tensor(torch.tensor({grad.indices.tolist()!r}), {_tensor(grad.values, dtype)}, " \
               f"{tuple(grad.size)!r})"
    return _tensor(grad, dtype)


def _layout_call(expression: str, layout: Layout | None) -> str:
    if layout is None or layout.is_contiguous:
        return f"{expression}.clone()"
    return f"placed({expression}, {layout.kind!r}, {layout.offset}, {layout.step})"


def layout_reproducer(optimizer_class: Any, example: tuple, dtype: str, reason: str) -> str | None:
    """A torch-only script of a layout-invariant example on torch's optimizer, or None where the example
    is not one (not an optimizer's trajectory, not torch's class, layouts of sparse parts)."""
    found = torch_optimizer(optimizer_class)
    if found is None or not isinstance(example, tuple) or len(example) != 2:
        return None
    inputs, layouts = example
    if not isinstance(inputs, OptimizerInputs) or any(role.startswith("grad.") and not layout.is_contiguous
                                                      for role, layout in layouts.items()):
        return None
    cls, keywords = found
    hyper = {**inputs.hyperparameters, **keywords}
    grads = ",\n    ".join(_grad(g, dtype) for g in inputs.grads)
    views = ", ".join(f"{role} {layout}" for role, layout in layouts.items() if not layout.is_contiguous)
    return f'''"""{cls.__name__}({", ".join(f"{k}={v!r}" for k, v in hyper.items())}) on {views} vs contiguous copies.

{reason}

Imports only torch. Exit 1 while the results differ (torch shows it), 0 once they agree, 3 when this torch
cannot run the example (a keyword or kernel it lacks).
Written by torch-sparse-conformance's layout-invariant property."""
import platform
import sys

import torch
{_PLACE}
PARAM = {_tensor(inputs.param, dtype)}
GRADS = [
    {grads},
]


def run(on_views):
    param = {_layout_call("PARAM", layouts.get("param"))} if on_views else PARAM.clone()
    optimizer = torch.optim.{cls.__name__}([param], **{hyper!r})
    for grad in GRADS:
        param.grad = ({_layout_call("grad", layouts.get("grad"))} if not grad.is_sparse else grad.clone()) \\
            if on_views else grad.clone()
        optimizer.step()
    return param.detach().clone()


print(f"torch {{torch.__version__}}, {{platform.platform()}}, {{platform.machine()}}, python {{platform.python_version()}}")
try:
    expected = run(False)
except Exception as exc:  # this torch cannot run the example at all (a keyword or kernel it lacks): not the divergence
    print(f"cannot run: {{type(exc).__name__}}: {{exc}}")
    sys.exit(3)
try:
    actual = run(True)
except Exception as exc:  # the views refused where the contiguous copies run
    print("expected (contiguous copies):", expected.tolist())
    print(f"actual ({views}): raises {{type(exc).__name__}}: {{exc}}")
    sys.exit(1)
print("expected (contiguous copies):", expected.tolist())
print("actual ({views}):", actual.tolist())
sys.exit(0 if torch.equal(expected, actual) else 1)
'''


def write_layout_reproducers(directory: Path, item_name: str, optimizer_class: Any, dtype: str,
                             observed: dict) -> list[Path]:
    """For each stock-torch divergence ``observed`` (key -> (divergence, detail, example)), a torch-only
    script under ``directory`` where one can be written; the paths written."""
    written = []
    for key, (divergence, _detail, example) in observed.items():
        if not divergence.is_torch_behaviour:
            continue
        script = layout_reproducer(optimizer_class, example, dtype, divergence.reason)
        if script is None:
            continue
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{item_name}--{key}.py".replace("/", "-").replace("[", "-").replace("]", "")
        path.write_text(script)
        written.append(path)
    return written
