"""``foreach``, ``fused``: torch's own optimizer code paths beside its default step, one backend per
path, as the optimizer records declare them (``torch_paths``: path -> the constructor keywords that
select it, e.g. ``{"foreach": {"foreach": True}, "fused": {"fused": True}}``).

Each runs stock ``torch.optim`` (the record's ``torch_implementation``) through the record's candidate
driving, constructed with the path's keywords. Where torch does not run the path on an input, the
item is ``unsupported`` with torch's own reason, never a failure: a step with a sparse gradient on a
path the record declares ``"for-loop"`` in ``torch_paths_on_sparse`` (torch runs its for-loop step
there instead: the coo backend's items already run that), and a step torch refuses -- the path's
RuntimeError on a sparse gradient (``"refuses"``), or fused's on a device or dtype it has no kernel
for. The twins (``paths-agree``, conformance/cases/checks.py) run the path and torch's for-loop
(the record's ``torch_for_loop`` keywords) on the same inputs.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Mapping

import numpy as np
import torch

from conformance.backends.base import PATHS_AGREE, Backend, torch_kernels_missing_are_unsupported
from conformance.ops import OPS, optimizer_record
from conformance.ops.base import COMPILED, FOR_LOOP, FOREACH, FUSED, GRAD_SCALING, REFUSES, TorchPath
from conformance.ops.optimizers.inputs import OptimizerInputs, has_sparse_step
from conformance.core.divergences import STOCK_TORCH, ConditionalDivergence, LayoutDivergence, PathDivergence, register
from conformance.core.layouts import contiguous_strides
from conformance.core.torch_release import NotInTorch
from conformance.core.types import RunContext, Unsupported

# fused's own refusal of a device or dtype (torch/optim/optimizer.py, _device_dtype_check_for_fused)
UNSUPPORTED_DEVICE_OR_DTYPE = "requires all the params to be floating point Tensors of supported devices"


def keywords_text(keywords: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in keywords.items())


# the dispatcher with no kernel of a fused step for the device: a release before torch had it there
# (an overload's name too: 'aten::_fused_sgd_.tensor_lr' on torch 2.3.1, a tensor lr)
_FUSED_KERNEL_MISSING = re.compile(r"Could not run '(aten::_fused_\w+(?:\.\w+)?)' with arguments from the '(\w+)' backend")


def path_class(torch_class: type[torch.optim.Optimizer], path: str, keywords: Mapping[str, Any],
               on_sparse: str | None) -> type:
    """``torch_class`` constructed with ``keywords`` (whatever else it is given), whose ``step()``
    raises Unsupported where torch does not run the path: a sparse gradient on a path that runs the
    for-loop step instead (``on_sparse`` "for-loop"), torch's own RuntimeError on a sparse gradient
    (``on_sparse`` "refuses") or on a device or dtype the path has no kernel for."""
    name = f"{torch_class.__name__}({keywords_text(keywords)})"
    accepted = inspect.signature(torch_class.__init__).parameters
    missing = [keyword for keyword in keywords if keyword not in accepted]

    class TorchPath(torch_class):  # type: ignore[misc, valid-type]
        torch_path = path
        torch_keywords = dict(keywords)  # what a torch-only reproducer constructs it with (cases/torch_repro.py)

        def __init__(self, params, *args: Any, **kwargs: Any):
            if missing:  # an older torch: the path is not there (torch 2.1's Adagrad has no fused=)
                raise NotInTorch(f"torch.optim.{torch_class.__name__}'s keyword {missing[0]}=")
            try:
                super().__init__(params, *args, **{**kwargs, **keywords})
            except RuntimeError as exc:  # torch 2.4's fused= refuses complex parameters here, not at the step
                if UNSUPPORTED_DEVICE_OR_DTYPE in str(exc):
                    raise Unsupported(f"torch's {path} path: {name} raises: {exc}") from exc
                raise

        def step(self, closure=None):
            sparse = any(p.grad is not None and p.grad.is_sparse
                         for group in self.param_groups for p in group["params"])
            if sparse and on_sparse == FOR_LOOP:
                raise Unsupported(f"torch's {path} path does not run on sparse gradients: {name} runs its "
                                  "for-loop step on a device's tensors when one gradient is sparse (the coo "
                                  "backend's items run that step)")
            if sparse:
                # a sparse gradient as autograd makes it, with storage of its own: the harness builds it
                # from NumPy (torch.from_numpy: storage that cannot resize), and SGD's foreach step with
                # nesterov adds the momentum buffer into p.grad in place (torch._foreach_add_), which
                # resizes a sparse gradient's storage
                for group in self.param_groups:
                    for p in group["params"]:
                        if p.grad is not None and p.grad.is_sparse:
                            p.grad = p.grad.clone()
            try:
                return super().step(closure)
            except NotImplementedError as exc:
                kernel = _FUSED_KERNEL_MISSING.search(str(exc))
                if kernel is not None:  # torch 2.3: fused SGD is there for CUDA tensors only
                    raise NotInTorch(f"the {kernel[1]} kernel for {kernel[2]} tensors, which {name} runs") from exc
                raise
            except RuntimeError as exc:
                if (sparse and on_sparse == REFUSES) or UNSUPPORTED_DEVICE_OR_DTYPE in str(exc):
                    raise Unsupported(f"torch's {path} path: {name} raises: {exc}") from exc
                raise

    TorchPath.__name__ = TorchPath.__qualname__ = name
    return TorchPath


class TorchPathBackend(Backend):
    """One of torch's code paths (``path``) of every optimizer whose record declares it."""

    lists_unimplemented_ops = False  # an op without the path (SparseAdam: no foreach, no fused) gets no items
    # generated: only the twin (the path against torch's for-loop step on the same inputs); the
    # for-loop step itself is the coo backend's, checked against the reference by every property
    # the twin, and the path on views, through lifecycles and on complex parameters
    generated_properties: tuple[str, ...] = ("paths-agree", "layout-invariant", "lifecycle", "complex-agrees")

    def __init__(self, path: str, classes: dict[str, type] | None = None, *, name: str | None = None,
                 description: str | None = None):
        """``classes``: op -> the optimizer class whose path runs (None: each record's
        ``torch_implementation``, for every record that declares ``path`` in ``torch_paths``)."""
        self.name = name or path
        self.torch_path = path
        # torch's fused steps take GradScaler's grad_scale/found_inf (the for-loop and foreach steps assert none)
        self.takes_grad_scaling = path == FUSED
        if self.takes_grad_scaling:
            self.generated_properties = (*TorchPathBackend.generated_properties, GRAD_SCALING)
        if classes is None:
            classes = {op: record.torch_implementation for op, record in OPS.items()
                       if record.is_optimizer and record.torch_path(path) is not None}
        declared = {op: OPS[op].torch_path(path) or TorchPath(path) for op in classes}
        self.classes = {op: path_class(cls, path, declared[op].keywords, declared[op].on_sparse)
                        for op, cls in classes.items()}
        self.torch_classes = dict(classes)  # op -> torch's optimizer class whose path runs
        # the other half of the twins: the same class's for-loop step
        self.for_loop_classes = {op: path_class(cls, FOR_LOOP, optimizer_record(op).torch_for_loop, None)
                                 for op, cls in classes.items()}
        self.description = description or (f"stock torch.optim's {path} step: "
                                           + "; ".join(cls.__name__ for cls in self.classes.values()))
        super().__init__({op: self._runner(op) for op in self.classes})

    def _runner(self, op: str):
        record = OPS[op]
        return lambda inputs, ctx: record.run_candidate(self.classes[op], inputs, ctx)

    def optimizer_class(self, op: str):
        return self.classes.get(op)

    def run_for_loop(self, op: str, inputs: Any, ctx: RunContext) -> dict[str, Any]:
        """torch's for-loop step of the same optimizer on ``inputs`` (the twins' other half)."""
        if op not in self.for_loop_classes:
            raise Unsupported(f"backend {self.name!r} has no for-loop twin for {op!r}")
        with torch_kernels_missing_are_unsupported(ctx.device, "torch's for-loop step"):
            return OPS[op].run_candidate(self.for_loop_classes[op], inputs, ctx)

    def run(self, op: str, inputs: Any, ctx: RunContext) -> dict[str, Any]:
        with torch_kernels_missing_are_unsupported(ctx.device, f"torch's {self.torch_path} path"):
            return super().run(op, inputs, ctx)

    def drive_optimizer(self, op: str, ctx: RunContext, use):
        with torch_kernels_missing_are_unsupported(ctx.device, f"torch's {self.torch_path} path"):
            return super().drive_optimizer(op, ctx, use)


def paths() -> list[str]:
    """Every path some optimizer record declares, in the records' order."""
    found: list[str] = []
    for record in OPS.values():
        for path in record.torch_paths if record.is_optimizer else ():
            if path.name not in found:
                found.append(path.name)
    return found


BACKENDS = tuple(TorchPathBackend(path) for path in paths() if path != COMPILED)  # compiled: its own module


# ---------------------------------------------------------------- what the twins found (docs/findings.md)

HALF = ("float16", "bfloat16")


def _rounds_otherwise(inputs, got, for_loop, agrees) -> bool:
    return agrees()


FLOAT16_MAX = 65504.0


def _numerator_overflows(inputs, got, for_loop, agrees) -> bool:
    """The path's parameter is inf (or NaN) where the for-loop step's is finite only at entries where
    some dense step's |grad| * clr is beyond float16's largest value (65504), and every other entry
    and output is within a few ulps of the for-loop step's."""
    if "param" not in got or not isinstance(inputs, OptimizerInputs):
        return False
    h = optimizer_record("adagrad").hyperparameters(inputs.hyperparameters)  # torch's defaults filled in
    overflow = np.zeros(np.shape(inputs.param), dtype=bool)
    for step, grad in enumerate(inputs.grads, start=1):
        if isinstance(grad, np.ndarray):
            clr = h["lr"] / (1 + (step - 1) * h["lr_decay"])
            with np.errstate(over="ignore"):
                overflow |= np.abs(grad.astype(np.float64)) * clr > FLOAT16_MAX
    path, loop = np.asarray(got["param"]), np.asarray(for_loop["param"])
    broken = ~np.isfinite(path) & np.isfinite(loop)
    if not broken.any() or (broken & ~overflow).any():
        return False
    for name in got.keys() & for_loop.keys():
        a, b = np.asarray(got[name]), np.asarray(for_loop[name])
        if name == "param":
            a, b = a[~overflow], b[~overflow]
        if not np.allclose(a, b, rtol=2.0 ** -6, atol=0.0, equal_nan=True):
            return False
    return True


# before torch-foreach-half-rounding: lookup tries them in declaration order
FOREACH_ADAGRAD_NUMERATOR_OVERFLOW = register(PathDivergence(
    "torch-foreach-adagrad-float16-numerator-overflow",
    "torch's foreach Adagrad step stores the numerator -clr * grad in the parameter's dtype "
    "(torch._foreach_mul in _multi_tensor_adagrad) before dividing by std; in float16 that product overflows "
    "to -inf once |grad| * clr > 65504 (lr 10000 and grad 8), where the for-loop step's "
    "addcdiv_(grad, std, value=-clr) divides first in float32 and stays finite (-10000.0)",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/torch/optim/adagrad.py",
    ops=("adagrad",), backends=(FOREACH,), dtypes=("float16",), properties=(PATHS_AGREE,),
    behaviour=STOCK_TORCH, explains=_numerator_overflows,
))

FOREACH_HALF_ROUNDING = register(PathDivergence(
    "torch-foreach-half-rounding",
    "torch's foreach step in float16/bfloat16 rounds its intermediates otherwise than the for-loop step, so the "
    "two differ by a few ulps (both within the tolerance of a correct implementation): Adagrad's "
    "_multi_tensor_adagrad stores -clr * grad in the dtype (torch._foreach_mul) before torch._foreach_addcdiv_, "
    "where _single_tensor_adagrad divides and scales in one addcdiv_(grad, std, value=-clr); SGD's momentum "
    "step goes through torch._foreach_mul_/_foreach_add_ (torch/optim/sgd.py, _multi_tensor_sgd). In "
    "float32/float64 the two are bit for bit the same on cpu",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/torch/optim/adagrad.py",
    ops=("adagrad", "sgd"), backends=(FOREACH,), dtypes=HALF, properties=(PATHS_AGREE,), behaviour=STOCK_TORCH,
    explains=_rounds_otherwise,
))

# before torch-fused-rounding: lookup tries them in declaration order, and "rounds otherwise" also takes a
# vectorized entry left unmoved where the step is within a correct implementation's tolerance (bfloat16
# param 100, update 0.5: the twin named torch-fused-rounding on torch 2.13 for what is this bug)
VECTOR = 16  # a multiple of Vectorized<Half>'s length on this build (16 with AVX2, 32 with AVX-512)


def _vectorized_entries_unmoved(inputs, got, for_loop, agrees) -> bool:
    """The parameter keeps its starting value at a leading block of its flattened entries whose length is
    a multiple of 16 (the kernel's vectorized part) and has the for-loop's value (within a few ulps) after it."""
    if "param" not in got:
        return False
    start = np.asarray(inputs.param, dtype=np.float64).reshape(-1)
    path, loop = got["param"].reshape(-1), for_loop["param"].reshape(-1)
    for block in range(len(path) - len(path) % VECTOR, 0, -VECTOR):
        if np.array_equal(path[:block], start[:block]) and np.allclose(
                path[block:], loop[block:], rtol=2.0 ** -6, atol=2.0 ** -6 * float(np.abs(start).max(initial=0.0))):
            return not np.array_equal(path, loop)
    return False


FUSED_SGD_HALF_VECTOR = register(PathDivergence(
    "torch-fused-sgd-half-skips-vectorized-entries",
    "torch's fused SGD step on cpu up to 2.13 (SGD(fused=True), torch._fused_sgd_) leaves a float16/bfloat16 "
    "parameter unchanged at its vectorized entries -- the leading multiple of the vector length (16 here), e.g. every "
    "entry of a 16- or 32-entry parameter -- and updates only the scalar tail (15 entries or fewer: all of them "
    "move): SGD(lr=1, fused=True) on ones(16) with gradient ones(16) keeps 1.0 where the documented step "
    "(param - lr * grad, the for-loop step) gives 0.0; float32/float64 are updated everywhere. Fixed in torch 2.14: "
    "2.14.0, 2.14.1 and 2.15.0 update every entry (2.9.0 and 2.13.0, cpu and cu130 builds alike, do not)",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/aten/src/ATen/native/cpu/FusedSGDKernel.cpp",
    ops=("sgd",), backends=(FUSED,), dtypes=HALF, properties=(PATHS_AGREE,), behaviour=STOCK_TORCH,
    explains=_vectorized_entries_unmoved, torch="<2.14",
))

FUSED_ROUNDING = register(PathDivergence(
    "torch-fused-rounding",
    "torch's fused step computes the whole update in one kernel (float32 arithmetic for a float16/bfloat16 "
    "parameter, rounded once when stored; another order of the same operations in float32/float64), where the "
    "for-loop step rounds each intermediate it stores: the two differ by a few ulps, and by more relative to a "
    "result that cancels (param close to the update), both within the tolerance of a correct implementation",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/aten/src/ATen/native/cpu/FusedAdagradKernel.cpp",
    ops=("adagrad", "sgd"), backends=(FUSED,), properties=(PATHS_AGREE,), behaviour=STOCK_TORCH,
    explains=_rounds_otherwise,
))


LAYOUT_INVARIANT = "layout-invariant"  # the property (conformance/cases/input_layouts.py)

FUSED_WALKS_STORAGE = register(LayoutDivergence(
    "torch-fused-cpu-walks-storage-linearly",
    "torch's fused CPU optimizer kernels (Adagrad(fused=True), SGD(fused=True): torch._fused_adagrad_, "
    "torch._fused_sgd_) walk the parameter, its gradient and its state from data_ptr() as if they were contiguous: "
    "on a parameter that is a strided view (torch.zeros(3, 4, 2)[..., 0]) they update the wrong entries and write "
    "into the storage around the view, and a transposed dense gradient (g.t()) is read in storage order. The "
    "for-loop and foreach steps read the strides. Modelled exactly: the same fused step handed the contiguous "
    "tensor over each view's window of storage leaves every storage and state as the run did. Shown by torch "
    "2.9.0 (nox, 2026-11-28), 2.13.0 and 2.14.1 on cpu; docs/findings.md has the torch-only reproducer",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/aten/src/ATen/native/cpu/FusedAdagradKernel.cpp",
    ops=("adagrad", "sgd"), backends=(FUSED,), devices=("cpu",), properties=(LAYOUT_INVARIANT,),
    behaviour=STOCK_TORCH, walks=("param", "grad"),
))


def _param_and_grad_strides_differ(inputs, placements) -> bool:
    """The parameter and its dense gradient were handed over with different strides (one of them a view)."""
    strides = {}
    for placement in placements:
        if placement.role in ("param", "grad"):
            strides[placement.role] = placement.view.stride()
    return len(set(strides.values())) > 1 or (len(strides) == 1 and any(
        p.view.stride() != contiguous_strides(tuple(p.view.shape)) for p in placements if p.role in strides))


FUSED_CUDA_REFUSES_MIXED_STRIDES = register(LayoutDivergence(
    "torch-fused-sgd-cuda-refuses-mixed-strides",
    "torch's fused CUDA SGD (SGD(fused=True), torch._fused_sgd_) raises RuntimeError 'Expected "
    "at::native::check_fast_path_restrictions({params, grads, momentum_buffer_list}) to be true' when the "
    "parameter is a view whose strides differ from its gradient's (a strided or transposed parameter, a contiguous "
    "gradient), where the same step on contiguous copies runs; the for-loop and foreach steps take them. Seen on "
    "an NVIDIA H200 with torch 2.11.0+cu130 on 2026-11-28 (float16, bfloat16 and float64 items of "
    "sgd-layout-invariant[fused-cuda-*], momentum 0.5); not yet re-run",
    "https://github.com/pytorch/pytorch/blob/v2.11.0/aten/src/ATen/native/cuda/fused_sgd_impl.cu",
    ops=("sgd",), backends=(FUSED,), devices=("cuda",), properties=(LAYOUT_INVARIANT,),
    behaviour=STOCK_TORCH, kind="error", raises="RuntimeError", match="check_fast_path_restrictions",
    triggered=_param_and_grad_strides_differ,
))


def _first_steps_differ(inputs) -> bool:
    """Some parameter takes its first step (a gradient) later than another one of the same optimizer."""
    firsts = {next((s for s, g in enumerate(m.grads) if g is not None), None)
              for m in getattr(inputs, "members", ()) if not m.frozen}
    firsts.discard(None)
    return len(firsts) > 1


FUSED_SGD_MIXED_BUFFERS = register(ConditionalDivergence(
    "torch-fused-sgd-momentum-first-step-later",
    "torch's fused SGD with momentum (SGD(momentum>0, fused=True) on cpu) raises TypeError ('expected Tensor as "
    "element 1 in argument 2, but got NoneType') at the step where one parameter takes its first step while "
    "another already has a momentum buffer: a parameter that had no gradient at step 1, or joined by "
    "add_param_group later. The for-loop and foreach steps create the new buffer. SGD([a, b], lr=1, momentum=0.9, "
    "fused=True) with a gradient for a only at step 1 and for both at step 2 raises; shown by torch 2.13.0 and 2.14.1",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/torch/optim/sgd.py",
    ops=("sgd",), backends=(FUSED,), devices=("cpu",), properties=("lifecycle",), behaviour=STOCK_TORCH,
    kind="error", raises="TypeError", match="expected Tensor as element", triggered=_first_steps_differ,
))

FOREACH_HALF_MOMENTUM_BY_GROUP = register(ConditionalDivergence(
    "torch-foreach-sgd-half-momentum-by-group",
    "torch's foreach SGD step in float16/bfloat16 rounds a momentum buffer otherwise when the parameters stepping "
    "together are at different steps (one takes its first step, another already has a buffer: _multi_tensor_sgd "
    "clones the first-step buffers apart from the _foreach_mul_/_foreach_add_ of the others), so a parameter's "
    "buffer differs by an ulp from the same parameter's in an optimizer of its own (torch-foreach-half-rounding's "
    "kind). float32/float64 agree bit for bit",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/torch/optim/sgd.py",
    ops=("sgd",), backends=(FOREACH,), devices=("cpu",), dtypes=HALF, properties=("lifecycle",),
    behaviour=STOCK_TORCH, triggered=_first_steps_differ,
))


def _skipped_first_step_with_momentum(case) -> bool:
    """The grad-scaling case skipped the optimizer's first step, and SGD has a momentum buffer to make."""
    return bool(getattr(case, "skipped_first", False)) and float(case.inputs.hyperparameters.get("momentum") or 0) != 0


FUSED_SGD_FOUND_INF_FIRST_STEP = register(ConditionalDivergence(
    "torch-fused-sgd-found-inf-first-step-garbage-momentum",
    "torch's fused SGD with momentum (SGD(momentum>0, fused=True); _fused_sgd in torch/optim/sgd.py) makes a "
    "parameter's momentum buffer with torch.empty_like at its first step, before the kernel runs; when "
    "torch.amp.GradScaler's found_inf skips that step the kernel returns at once, so the state keeps uninitialized "
    "memory as 'momentum_buffer', and the next step (no longer a first step) adds it into the momentum: a 4,096-"
    "entry parameter of ones, lr 0.5, momentum 0.9, gradient 2 after a skipped first step ends NaN or 1e15-1e38 "
    "off at some entries instead of 0. GradScaler starts at a scale of 65,536, so AMP training often skips its "
    "first steps. Shown by torch 2.9.0 and 2.13.0 on cpu (2026-11-28; 2.12.0's sgd.py has the same code); "
    "docs/findings.md has the torch-only reproducer",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/torch/optim/sgd.py",
    ops=("sgd",), backends=(FUSED,), properties=(GRAD_SCALING,), behaviour=STOCK_TORCH,
    triggered=_skipped_first_step_with_momentum,
))


FOREACH_SGD_SPARSE = register(ConditionalDivergence(
    "torch-foreach-sgd-sparse-gradients-not-implemented",
    "torch's foreach SGD step (SGD(foreach=True)) in torch 2.1-2.3 applies torch._foreach_mul_, _foreach_neg or "
    "_foreach_add_ to sparse gradients and momentum buffers, which have no SparseCPU kernel: NotImplementedError "
    "(\"Could not run 'aten::_foreach_mul_.Scalar' with arguments from the 'SparseCPU' backend\") with momentum, "
    "nesterov, dampening or maximize, where its for-loop step takes them as documented; dated by its reproducer",
    "https://github.com/pytorch/pytorch/blob/v2.3.1/torch/optim/sgd.py",
    ops=("sgd",), backends=(FOREACH,), properties=(PATHS_AGREE, "complex-agrees"), behaviour=STOCK_TORCH,
    kind="error", raises="NotImplementedError", match=r"aten::_foreach_\w+.*'Sparse", torch="<2.4",
    triggered=has_sparse_step,
))

def _tensor_lr_on_a_0d_param(inputs) -> bool:
    """The lr is a 0-d tensor and some parameter is 0-d."""
    return bool(getattr(inputs, "tensor_lr", False)) and any(np.ndim(m.param) == 0 for m in getattr(inputs, "members", ()))


FOREACH_ADAGRAD_HALF_TENSOR_LR = register(ConditionalDivergence(
    "torch-foreach-adagrad-half-tensor-lr-internal-assert",
    "torch 2.1's foreach Adagrad on cpu with the lr a 0-d tensor (documented: lr may be a Tensor) and a 0-d float16 "
    "or bfloat16 parameter fails with \"!needs_dynamic_casting<func_t>::check(iter) INTERNAL ASSERT FAILED ... please "
    "report a bug to PyTorch\" in torch._foreach_addcdiv_, where a float lr steps the bfloat16 one and refuses the "
    "float16 one cleanly (\"addcdiv_cpu_out\" not implemented for 'Half': unsupported); dated by its reproducer",
    "https://github.com/pytorch/pytorch/blob/v2.1.2/torch/optim/adagrad.py",
    ops=("adagrad",), backends=(FOREACH,), devices=("cpu",), dtypes=HALF, properties=("lifecycle",),
    behaviour=STOCK_TORCH, kind="error", raises="RuntimeError", match="needs_dynamic_casting", torch="<2.2",
    triggered=_tensor_lr_on_a_0d_param,
))

FOREACH_ADAGRAD_MAXIMIZE_COMPLEX = register(ConditionalDivergence(
    "torch-foreach-adagrad-maximize-complex-tuple-assignment",
    "torch 2.2's foreach Adagrad with maximize on a complex parameter negates the gradients with torch._foreach_neg, "
    "which returns a tuple, then assigns their real views into it: TypeError \"'tuple' object does not support item "
    "assignment\", where the for-loop step runs; found by the sweep's 2.2.2 run (adagrad-complex-agrees[foreach]) and "
    "dated by its reproducer",
    "https://github.com/pytorch/pytorch/blob/v2.2.2/torch/optim/adagrad.py",
    ops=("adagrad",), backends=(FOREACH,), properties=("complex-agrees",), behaviour=STOCK_TORCH, kind="error",
    raises="TypeError", match="does not support item assignment", torch=">=2.2,<2.3",
    triggered=lambda inputs: bool(getattr(inputs, "hyperparameters", {}).get("maximize")),
))
