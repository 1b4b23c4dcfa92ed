"""``compiled``: torch's optimizer step under ``torch.compile`` (TorchDynamo traces ``optimizer.step()``,
Inductor generates the kernel: C++ on cpu), for every optimizer record that declares the path
``"compiled"`` in ``torch_paths`` (its value: the constructor keywords of the step that is compiled,
e.g. ``{"foreach": False}``, torch's for-loop step -- so that the twin compares the compiled step with
the very same step run eagerly); and, for every other record that declares it (its value:
``{"function": f}``, the function torch users write for the op, looked up at each run), ``f`` under
``torch.compile(dynamic=True)``, run through the record's candidate driving: the masked mean's dense
formulation ``where(mask, values, 0).sum() / mask.sum()`` (forward and backward compiled), and
``tensor.coalesce()`` -- which Dynamo does not trace (a sparse input), so its items are unsupported with
Dynamo's reason.

One compiled function per process (:func:`compiled_step`, ``dynamic=True``: parameters of other sizes
do not recompile); every optimizer the backend constructs starts from an empty Dynamo cache
(``torch._dynamo.reset()``: Dynamo guards on the optimizer object, so another optimizer's graphs never
serve, and past ``recompile_limit`` cached graphs Dynamo would run the step eagerly without a word --
``fail_on_recompile_limit_hit`` makes that an error instead). Inductor's own caches (the FX graph and
the compiled C++ on disk) are kept, so a graph compiled once is loaded, not compiled, next time: in a
folder of the suite's own per environment (:func:`inductor_cache`, beside the C++ kernels' build folder),
not torch's machine-wide one, unless ``TORCHINDUCTOR_CACHE_DIR`` is set. A compile that fails on what a
corrupt cache entry gives (a truncated ``.so``: ``ImportError``, ``CppCompileError``) names that folder.

What Dynamo did on each run is counted (``torch._dynamo.utils.counters``) and recorded in the item's
record under ``compiles`` (the results schema's compile counts, :data:`COUNTS_KEY`, compiler
``torch.compile/inductor``): graphs compiled, those compiled after the first step or call (recompiles),
graph breaks and frames. A step or call that compiled nothing (Dynamo disabled, or a frame Dynamo would
not trace) is Unsupported, never an eager pass. Where the compiled step does not run torch's graph: a
sparse gradient -- Dynamo does not trace sparse tensors (a graph break, and the step runs eagerly: the
coo backend's items run that step) -- the item is Unsupported with torch's reason; so is a compiled
function Dynamo skips (its reason, from Dynamo's own counters) or Inductor refuses (NotImplementedError).
A compiled function's item starts from an empty Dynamo cache too (``torch._dynamo.reset()``), so its
counts do not depend on which items ran before it in the process; Inductor's caches serve its graphs.

The twin, ``compiled-agrees`` (conformance/cases/checks.py): the compiled step against the same step
run eagerly, on the same generated dense-gradient trajectories, float32/float64, a few examples an item
(each example compiles).
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch

from conformance.backends.base import COMPILED_AGREES
from conformance.backends.torch_paths import TorchPathBackend, keywords_text
from conformance.ops.base import COMPILED, TorchPath
from conformance.ops import OPS
from conformance.core.divergences import STOCK_TORCH, PathDivergence, register
from conformance.core.caches import suite_cache_directory
from conformance.core.dtypes import info
from conformance.core.float_env import keep_denormals
from conformance.core.record import COMPILES, INDUCTOR, compiles
from conformance.core.tensors import CooArray
from conformance.core.types import RunContext, Unsupported, exception_text

# torch._dynamo and torch._inductor are imported in the functions that use them, never here: they import
# triton (seconds), which must not be imported before conformance.backends.kernel sets TRITON_INTERPRET
# (its Triton kernels would not run on cpu), and builtin_backends() imports this module in every run

COUNTS_KEY = COMPILES  # the record's compile counts (conformance.core.record.Compiles, compiler INDUCTOR)
COMPILER = INDUCTOR  # what compiled them: torch.compile's default backend
# what Dynamo says of a sparse tensor (torch/_dynamo/variables/builder.py, graph break gb0015); a test
# (tests/test_compiled_path.py) checks that torch still graph-breaks with this reason
SPARSE_REASON = "Attempted to wrap sparse Tensor: torch.compile does not support sparse Tensors"
# the dtypes the compiled backend compiles optimizer steps in: every step compiles (seconds of C++), so the
# main job's items stay few; a half dtype is Unsupported by this choice, never by torch's refusal. A declared
# function (the masked mean: one small reduction, loaded from Inductor's cache in a fraction of a second once
# compiled) is compiled in every dtype
COMPILED_DTYPES = ("float32", "float64")

@dataclass
class StepLog:
    """What the compiled steps of a backend's current run did (its runs come one at a time): Dynamo's
    counts on each step, and whether the run's trajectory has a sparse step."""

    counts: list[dict[str, int]] = field(default_factory=list)
    sparse_steps: bool = False

    def start(self, inputs: Any) -> None:
        self.counts.clear()
        self.sparse_steps = any(isinstance(grad, CooArray) for grad in getattr(inputs, "grads", ()))

    def finish(self, ctx: RunContext) -> None:
        """The run's counts into its item's record, and the log emptied for the next run."""
        if self.counts:
            ctx.record[COUNTS_KEY] = compiles(COMPILER, counts_of(self.counts))
        self.counts.clear()
        self.sparse_steps = False


def _eager_step(optimizer) -> Any:
    return optimizer.eager_step()


@functools.lru_cache(maxsize=1)
def compiled_step():
    """The process's one compiled step function: ``optimizer -> optimizer.eager_step()`` (torch's
    step of the optimizer's class) under ``torch.compile(dynamic=True)`` with Inductor."""
    _import_inductor()
    return torch.compile(_eager_step, dynamic=True)


def _import_inductor() -> None:
    """Inductor imported without the DeprecationWarnings torch's own modules raise as they load
    (torch.utils.mkldnn's ``torch.jit.script_method``, 28 of them): a user's run would print them as
    its warnings summary, although they say nothing about the code under test."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.script_method` is deprecated", category=DeprecationWarning)
        import torch._inductor.compile_fx  # noqa: F401


INDUCTOR_CACHE_DIR = "TORCHINDUCTOR_CACHE_DIR"  # Inductor reads it at each use, and sets it at its first


def inductor_cache() -> str:
    """The folder of Inductor's caches in this process: ``$TORCHINDUCTOR_CACHE_DIR`` when set (by the
    user, or by torch: importing torch._dynamo fixes it), else the suite's own for this environment, set
    here (a run sets it at its start, conformance.run.plugin); a corrupt entry in torch's machine-wide
    folder (``/tmp/torchinductor_<user>``), left by any program, failed every later run's compiled items."""
    if not os.environ.get(INDUCTOR_CACHE_DIR):
        os.environ[INDUCTOR_CACHE_DIR] = str(suite_cache_directory("inductor"))
    return os.environ[INDUCTOR_CACHE_DIR]


# what a corrupt entry of Inductor's cache raises: a truncated .so loaded (ImportError, OSError) or a
# truncated ISA probe, after which the C++ is compiled without the vector headers (CppCompileError)
CACHE_FAILURES = (ImportError, OSError)
CACHE_FAILURE_NAMES = ("CppCompileError",)


class InductorCacheSuspect(RuntimeError):
    """A compile failed as a corrupt entry of Inductor's cache makes it fail."""


@contextmanager
def _cache_named():
    """A compile that fails with what a corrupt cache entry raises (raised itself, or wrapped in
    BackendCompilerFailed, its ``inner_exception``): the error names the cache folder."""
    try:
        yield
    except Exception as exc:
        for cause in (exc, getattr(exc, "inner_exception", None)):
            if cause is not None and (isinstance(cause, CACHE_FAILURES) or type(cause).__name__ in CACHE_FAILURE_NAMES):
                raise InductorCacheSuspect(f"{_cache_note(cause)}\n{exception_text(exc)}") from exc
        raise


def _cache_note(cause: BaseException) -> str:
    folder = os.environ.get(INDUCTOR_CACHE_DIR, "torch's default folder")
    return (f"torch.compile failed with {type(cause).__name__}, as it does on a corrupt entry of Inductor's cache, "
            f"which for this run is {folder}: such an entry (a truncated .so, after a full disk or a process killed "
            "while it wrote) fails every later compile of that code, and torch never rebuilds it. Delete that folder "
            "and run again: an error that stays is torch's. What torch raised:")


def _counters() -> tuple[int, int, int]:
    from torch._dynamo.utils import counters  # lazy: imports triton (see the imports above)

    return (counters["stats"]["unique_graphs"], sum(counters["graph_break"].values()), counters["frames"]["total"])


def _reasons() -> dict[str, int]:
    """Dynamo's reasons so far for a graph break (``graph_break``) or a frame it would not trace
    (``unimplemented``, e.g. a sparse tensor input), with how often each was given."""
    from torch._dynamo.utils import counters  # lazy: imports triton (see the imports above)

    return {**counters["graph_break"], **counters["unimplemented"]}


def one_line(reason: str) -> str:
    """Dynamo's reason on one line: what it attempted, its explanation and the graph-break site's link
    ("Attempted to wrap sparse Tensor: torch.compile does not support sparse Tensors (https://...gb0015.html)")."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    if not lines:
        return "no reason given"
    text = lines[0]
    explanation = next((line.split(":", 1)[1].strip() for line in lines[1:] if line.startswith("Explanation:")), None)
    if explanation:
        text += f": {explanation}"
    link = next((word for line in lines for word in line.split() if word.startswith("https://")), None)
    return f"{text} ({link})" if link else text


def sparse_unsupported(name: str) -> Unsupported:
    return Unsupported(f"torch's compiled path does not run on sparse gradients: Dynamo graph-breaks ('{SPARSE_REASON}') "
                       f"and {name} runs the step eagerly (the coo backend's items run that step)")


def compiled_class(torch_class: type[torch.optim.Optimizer], keywords: Mapping[str, Any], log: StepLog) -> type:
    """``torch_class`` constructed with ``keywords``, whose ``step()`` runs under torch.compile (what
    Dynamo did on each step counted in ``log``)."""
    name = f"torch.compile({torch_class.__name__}({keywords_text(keywords)}).step)"

    class TorchCompiled(torch_class):  # type: ignore[misc, valid-type]
        torch_path = COMPILED

        def __init__(self, params, *args: Any, **kwargs: Any):
            import torch._dynamo  # lazy: imports triton (see the imports above)

            super().__init__(params, *args, **{**kwargs, **keywords})  # torch's own errors first (its validation)
            if log.sparse_steps:  # a later step is sparse: said before the dense steps compile in vain
                raise sparse_unsupported(name)
            # torch wraps a class's step() in its profiler hook when the class is first constructed in a
            # process (Optimizer._patch_step_function), and a user's compiled step runs through that hook:
            # one built here, so that Dynamo traces the same frames whether or not an item of another
            # backend built one first (SGD with nesterov traced 5 frames and broke once in a process with
            # no SGD built yet, 11 frames and twice after a coo item)
            construct: Callable[..., torch.optim.Optimizer] = torch_class  # (a subclass: its own constructor)
            construct([torch.nn.Parameter(torch.zeros(1))],
                      **({"lr": 0.1} if "lr" in _init_parameters(torch_class) else {}))
            torch._dynamo.reset()  # this optimizer's graphs only (Dynamo guards on the optimizer object)

        def eager_step(self, closure=None):
            return torch_class.step(self, closure)

        def step(self, closure=None):
            if closure is not None:
                raise Unsupported(f"{name}: the compiled backend steps without a closure")
            if any(p.grad is not None and p.grad.is_sparse for group in self.param_groups for p in group["params"]):
                raise sparse_unsupported(name)
            before = _counters()
            with _compiling_here(), _cache_named():
                out = compiled_step()(self)
            graphs, breaks, frames = (after - was for after, was in zip(_counters(), before))
            if not log.counts and graphs == 0:
                raise Unsupported(f"{name} compiled no graph on its first step (is TorchDynamo disabled?): "
                                  "the step ran eagerly")
            log.counts.append({"graphs": graphs, "graph_breaks": breaks, "frames": frames})
            return out

    TorchCompiled.__name__ = TorchCompiled.__qualname__ = name
    return TorchCompiled


def _init_parameters(torch_class: type[torch.optim.Optimizer]) -> set[str]:

    return set(inspect.signature(torch_class.__init__).parameters)


def counts_of(steps: list[dict[str, int]], unit: str = "steps") -> dict[str, int]:
    """A run's compile counts as the record keeps them (``counts`` of its :data:`COUNTS_KEY`): graphs
    Dynamo compiled (``dynamo_graphs``), those on the steps (calls) after the first (``dynamo_recompiles``),
    graph breaks (each compile of a frame that breaks counts its breaks once), frames traced, and the
    number of ``unit`` (``steps`` of an optimizer, ``calls`` of a compiled function)."""
    return {"dynamo_graphs": sum(s["graphs"] for s in steps),
            "dynamo_recompiles": sum(s["graphs"] for s in steps[1:]),
            "dynamo_graph_breaks": sum(s["graph_breaks"] for s in steps),
            "dynamo_frames": sum(s["frames"] for s in steps),
            unit: len(steps)}


@contextmanager
def _compiling_here():
    """Inductor compiles in this process (compile_threads=1: not in a pool of workers it starts first,
    about 5 s of every process's first compile on 2 cores); past ``recompile_limit`` an error, never a
    silent eager run."""
    # lazy: they import triton (see the imports above)
    import torch._dynamo
    import torch._inductor.config

    # an older torch (2.1) has no fail_on_recompile_limit_hit: there a run past the limit runs eagerly, which the
    # counts show (a step that compiled nothing is Unsupported)
    strict = {"fail_on_recompile_limit_hit": True} if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit") else {}
    try:
        # (patch's dict form: torch annotates its **kwargs as dicts)
        with torch._dynamo.config.patch(strict), torch._inductor.config.patch(compile_threads=1):
            yield
    finally:
        keep_denormals()  # torch 2.5's compiled C++ turns on flush-to-zero for the process (core/float_env.py)


def compiled_function(op: str, function: Callable, calls: list[dict[str, int]]) -> Callable:
    """``function`` (the record ``op``'s declared one) under ``torch.compile(dynamic=True)``, from an
    empty Dynamo cache; each call's counts are appended to ``calls``. A call that compiled no graph
    (Dynamo skipped the frame, and the call ran eagerly) is Unsupported with Dynamo's reason."""
    import torch._dynamo  # lazy: imports triton (see the imports above)

    name = f"torch.compile({getattr(function, '__name__', repr(function))}, dynamic=True)"
    torch._dynamo.reset()  # this item's graphs only: its counts do not depend on the items before it
    _import_inductor()
    compiled = torch.compile(function, dynamic=True)

    def call(*args: Any) -> Any:
        before, reasons = _counters(), _reasons()
        try:
            with _cache_named():
                out = compiled(*args)
        except torch._dynamo.exc.Unsupported as exc:  # Dynamo's own refusal (fullgraph, or raised through)
            raise Unsupported(f"{name}: Dynamo does not trace it: {one_line(str(exc))}") from exc
        except torch._dynamo.exc.BackendCompilerFailed as exc:
            refused = _not_implemented(exc)
            if refused is not None:  # Inductor has no lowering or kernel for this input
                raise Unsupported(f"{name}: Inductor does not compile it: {refused}") from exc
            raise
        graphs, breaks, frames = (after - was for after, was in zip(_counters(), before))
        if not calls and graphs == 0:
            new = [one_line(reason) for reason, count in _reasons().items() if count > reasons.get(reason, 0)]
            why = "; ".join(new) or "no reason recorded (is TorchDynamo disabled?)"
            raise Unsupported(f"{name} compiled no graph: Dynamo did not trace it ({why}), and the call ran eagerly "
                              f"(the {OPS[op].stock_backend} backend's items run torch's op eagerly)")
        calls.append({"graphs": graphs, "graph_breaks": breaks, "frames": frames})
        return out

    call.__name__ = call.__qualname__ = name
    return call


def _not_implemented(exc: BaseException | None) -> NotImplementedError | None:
    """The NotImplementedError a compile failure wraps, directly (``inner_exception``) or further down
    its causes: torch 2.4's Inductor wraps it in a LoweringException ("could not find kernel for
    aten._coalesce.default"), later releases do not get that far (Dynamo graph-breaks on a sparse input)."""
    seen: list[BaseException] = []
    while exc is not None and len(seen) < 8 and exc not in seen:
        if isinstance(exc, NotImplementedError):
            return exc
        seen.append(exc)
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
    return None


INDUCTOR_DEVICES = ("cpu", "cuda")  # the devices Inductor generates code for


def function_ops() -> list[str]:
    """The records other than the optimizers' that declare a compiled function (``torch_paths``:
    ``{"compiled": {"function": f}}``), in the records' order."""
    return [op for op, record in OPS.items() if not record.is_optimizer and record.torch_path(COMPILED) is not None]


class CompiledBackend(TorchPathBackend):
    """torch's optimizer step under torch.compile (Inductor), for every optimizer record that declares
    ``compiled``; the declared function of every other record that declares it."""

    twin_property = COMPILED_AGREES  # its twin: the property its registered divergences name
    # an item may compile its steps cold (Inductor generates C++ and runs the compiler): over a
    # minute on a loaded 2-core machine with torch 2.9, where the first calls compiled nothing
    # (the ops' first explicit examples have sparse gradients)
    timeout_factor = 5.0
    generated_properties = (COMPILED_AGREES,)

    def __init__(self, classes: dict[str, type] | None = None, *, name: str | None = None,
                 dtypes: tuple[str, ...] = COMPILED_DTYPES, function_dtypes: tuple[str, ...] | None = None):
        """``dtypes``: those it compiles optimizer steps in; ``function_dtypes``: those it compiles the
        declared functions in (None: every dtype)."""
        self.dtypes = dtypes
        self.function_dtypes = function_dtypes
        super().__init__(COMPILED, classes, name=name, description="stock torch.optim's step under torch.compile "
                         "(TorchDynamo + Inductor)")
        self.log = StepLog()
        self.classes = {op: compiled_class(cls, (OPS[op].torch_path(COMPILED) or TorchPath(COMPILED)).keywords, self.log)
                        for op, cls in self.torch_classes.items()}
        self.functions = function_ops()
        self.runners.update({op: self._function_runner(op) for op in self.functions})
        self.description += ": " + "; ".join([cls.__name__ for cls in self.classes.values()] + [
            f"torch.compile({self.function(op).__name__}, dynamic=True) ({op})" for op in self.functions])

    @staticmethod
    def function(op: str) -> Callable:
        """The function record ``op`` declares compiled (looked up at each run)."""
        path = OPS[op].torch_path(COMPILED)
        assert path is not None and path.function is not None, f"{op} declares no compiled function"
        return path.function

    def _refuse(self, ctx: RunContext, dtypes: tuple[str, ...] | None, what: str = "steps") -> None:
        """Unsupported on a device Inductor generates no code for, or a dtype this backend does not compile
        (``dtypes``, None: every dtype) ``what`` in."""
        if ctx.device not in INDUCTOR_DEVICES:
            raise Unsupported(f"torch.compile's default backend (Inductor) generates code for "
                              f"{' and '.join(INDUCTOR_DEVICES)}, not {ctx.device} (torch_xla compiles through "
                              f"its own backend, openxla, which this backend does not run)")
        dtype = info(ctx.dtype).name
        if dtypes is not None and dtype not in dtypes:
            raise Unsupported(f"the {self.name} backend compiles {' and '.join(dtypes)} {what} only (each "
                              f"step compiles C++: the main job keeps its compiled items few), not {dtype}")

    def _function_runner(self, op: str):
        record = OPS[op]

        def run(inputs, ctx: RunContext) -> dict[str, Any]:
            self._refuse(ctx, self.function_dtypes, "functions")
            calls: list[dict[str, int]] = []
            try:
                with _compiling_here():  # the backward compiles on its first call, after the forward returned
                    return record.run_candidate(compiled_function(op, self.function(op), calls), inputs, ctx)
            finally:
                if calls:
                    ctx.record[COUNTS_KEY] = compiles(COMPILER, counts_of(calls, "calls"))
        return run

    def first_run_builds(self, devices, ops) -> str | None:
        if ops is not None and not set(ops) & set(self.runners):
            return None
        folder = Path(inductor_cache())
        if folder.is_dir() and next(folder.rglob("*.so"), None) is not None:
            return None
        return f"Inductor's compiled steps, as their items run (C++ on cpu; {folder})"

    def run(self, op: str, inputs: Any, ctx: RunContext) -> dict[str, Any]:
        inductor_cache()  # used outside a run too: before its first compile imports torch._dynamo
        return super().run(op, inputs, ctx)

    def run_for_loop(self, op: str, inputs: Any, ctx: RunContext) -> dict[str, Any]:
        """The twin's other half: an optimizer's same step run eagerly; a compiled function's same function
        called eagerly."""
        if op in self.functions:
            return OPS[op].run_candidate(self.function(op), inputs, ctx)
        return super().run_for_loop(op, inputs, ctx)

    def _runner(self, op: str):
        record = OPS[op]

        def run(inputs, ctx: RunContext) -> dict[str, Any]:
            self._refuse(ctx, self.dtypes)
            self.log.start(inputs)
            try:
                return record.run_candidate(self.classes[op], inputs, ctx)
            finally:
                self.log.finish(ctx)
        return run


BACKEND = CompiledBackend()


# ---------------------------------------------------------------- what the twin found (docs/findings.md)

def _learning_rate_in_float32(inputs, got, for_loop, agrees) -> bool:
    """The compiled outputs are the eager ones but for the effective learning rate rounded to float32 in
    each step: a relative error of at most 2^-24 in clr = lr / (1 + (step - 1) lr_decay), which moves the
    parameter by at most 2^-24 |clr| |g / (sqrt(sum) + eps)| <= 2^-24 |lr| a step (|g| <= sqrt(sum): the sum
    holds g^2, initial_accumulator_value >= 0), the state sum only through weight decay. Allowed: 16 times
    that, per step."""
    steps = max(len(inputs.grads), 1)
    bound = 16 * 2.0 ** -24 * steps * abs(float(inputs.hyperparameters.get("lr", 0.01)))
    return all(np.allclose(got[name], for_loop[name], rtol=16 * 2.0 ** -24 * steps, atol=bound) for name in got)


COMPILED_ADAGRAD_LR_IN_FLOAT32 = register(PathDivergence(
    "torch-compiled-adagrad-float32-learning-rate",
    "torch's Adagrad step under torch.compile (2.9.0, 2.13.0 and 2.15.0 alike) computes the effective learning rate "
    "clr = lr / (1 + (step - 1) * lr_decay) from the float32 step tensor (torch/optim/adagrad.py, "
    "_single_tensor_adagrad: _get_value(step_t) returns the tensor while compiling, not step_t.item()), so a "
    "float64 parameter moves by lr rounded to float32: Adagrad(lr=8.31, eps=1e-6) on param -1.0, gradient 2.875 "
    "gives -9.309997529182775 compiled (eager with lr=float32(8.31) gives the same bits) where eager, as the "
    "documented algorithm, gives -9.309997109566224 (relative error 4.5e-8 in the step, float32's roundoff)",
    "https://github.com/pytorch/pytorch/pull/186510",
    ops=("adagrad",), backends=(COMPILED,), dtypes=("float64",), properties=(COMPILED_AGREES,), behaviour=STOCK_TORCH,
    explains=_learning_rate_in_float32,
))
