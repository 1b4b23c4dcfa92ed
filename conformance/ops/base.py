"""What an op is: its contract (input and output schema), its NumPy reference, how a
user-supplied candidate implementation of it is driven, and the generated properties it is
checked against (with the Hypothesis strategies that draw their examples)."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field, fields
from types import MappingProxyType, MethodType
from typing import Any, Callable, Mapping

import numpy as np
from hypothesis import strategies as st

from conformance.core.divergences import Divergence
from conformance.core.layouts import layouts_strategy
from conformance.core.tensors import encode_array
from conformance.core.twins import COMPILED_AGREES, GRAD_SCALING, PATHS_AGREE, TWIN_PROPERTIES  # noqa: F401 - the paths' twins
from conformance.core.tolerances import ErrorBound
from conformance.core.types import RunContext
from conformance.ops import defaults
from conformance.ops.declared import CODE, check_names, check_record, takes_op

LAYOUT_INVARIANT = "layout-invariant"  # the property every op with input_layouts has (conformance/cases/input_layouts.py)
SIZES = "sizes"  # the property of every op that declares strategies.sizes
# the input space's dimensions, each by the property that covers it: an op has the property, or says in
# Op.dimensions_left_out why not (tests/test_configurations.py)
DIMENSIONS = MappingProxyType({"layouts": "layout-invariant", "sizes": SIZES, "complex": "complex-agrees",
                               "lifecycles": "lifecycle", "configurations": "configurations"})
LAYOUT_EXAMPLES = 4  # drawn examples per layout-invariant item beside its two explicit ones (the main job's minute)
SIZES_EXAMPLES = 4  # drawn examples per sizes item beside the explicit ones: each is hundreds of entries
# the sizes where kernels change behaviour: vector widths (16 floats of AVX-512, 16 halves of AVX2), block sizes
# (32, 64, 256), each with a remainder of one either side
SIZE_BOUNDARIES = (15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257)


def _declaring_module() -> str:
    """The module whose code makes a record (the first caller outside this module and dataclasses')."""
    frame = sys._getframe(2)
    while frame.f_back is not None and frame.f_globals.get("__name__") in (__name__, "dataclasses"):
        frame = frame.f_back
    return str(frame.f_globals.get("__name__", "?"))


def _quiet_numpy(reference: Callable) -> Callable:
    """``reference`` run under ``np.errstate(all="ignore")``."""
    @functools.wraps(reference)
    def quiet(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return reference(*args, **kwargs)

    quiet.quiet = True  # type: ignore[attr-defined]  # (a record made again by dataclasses.replace: wrapped once)
    return quiet


@dataclass(frozen=True)
class GeneratedProperty:
    """A generated property an op declares (``Op.properties``), run as the item
    ``generated::<op>-<name>`` on every backend, device and dtype.

    ``check(trial, example)`` raises ``conformance.core.compare.Mismatch`` where the backend misses the
    property; None means the suite's generic check of this name (``conformance.cases.properties.CHECKS``:
    agrees-with-reference, rounds-correctly, rejects-invalid, and the optimizers'
    unspecified-unchanged, sparse-equals-dense, param-groups, state-dict-resume). An op's own check
    uses what a trial offers: ``trial.op``, ``.dtype``, ``.device``, ``.run(inputs)``,
    ``.reference(inputs)``, ``.tolerances(inputs)``, ``.emulate(inputs)`` (stock torch's
    half-precision arithmetic), ``.compare(outputs, expected, tolerances, inputs, against, model=None)``
    and ``.excuse(runs, mismatch)`` (a known divergence that explains every run). ``to_cases(example,
    dtype)`` lists the op inputs an example stands for, as (label, inputs) pairs (default: the
    example itself)."""

    name: str
    summary: str
    strategy: Callable[[str], Any]  # dtype -> a Hypothesis strategy of examples
    check: Callable[[Any, Any], None] | None = None
    to_cases: Callable[[Any, str], list[tuple[str, Any]]] | None = None
    dtypes: tuple[str, ...] | None = None  # None: every float dtype (or the generic check's own)
    skip_backends: tuple[str, ...] = ()
    # dtype -> examples always run first (Hypothesis' explicit examples); None: the op's
    # explicit_examples where ``strategy`` draws its strategies.inputs, else none
    examples: Callable[[str], list] | None = None
    max_examples: int | None = None  # at most this many drawn examples per item (an expensive property); None: the run's


def inputs_in_layouts(op: "Op", dtype: str) -> Any:
    """(inputs, layouts by role): the op's valid inputs, each role of its ``input_layouts`` in a drawn layout
    (shrinking toward contiguous): what layout-invariant draws unless the record declares another."""
    assert op.strategies.inputs is not None  # (an op has layout-invariant only beside strategies.inputs)
    return st.tuples(op.strategies.inputs(op, dtype), layouts_strategy(op.input_layouts))


def dtype_only(strategy: Callable[..., Any]) -> Callable[..., Any]:
    """A strategy of the dtype (and options) alone, as a :class:`Strategies` field, which is handed the op too."""
    def drawn(op: "Op", dtype: str, **options: Any) -> Any:
        return strategy(dtype, **options)

    drawn.__name__ = drawn.__qualname__ = getattr(strategy, "__name__", "strategy")
    return drawn


@dataclass(frozen=True)
class Strategies:
    """An op's Hypothesis strategies, one record, by what they draw. Each field is ``(op, dtype) -> a
    strategy`` (``inputs`` takes options such as ``max_steps`` too; ``hyperparameters`` is ``() -> a
    strategy``); None: the op draws nothing of that kind, and has no property that would. The properties
    read them (:meth:`Op.all_properties`, ``OptimizerOp.properties``); a record declares its own as
    ``strategies = Strategies(...)``, an optimizer as ``dataclasses.replace(OPTIMIZER_STRATEGIES, ...)``."""

    inputs: Callable[..., Any] | None = None  # valid inputs: agrees-with-reference, deterministic and most others
    invalid: Callable[..., Any] | None = None  # inputs with exactly one documented error: rejects-invalid
    rounding: Callable[..., Any] | None = None  # float16/bfloat16 inputs where rounding decides: rounds-correctly
    sizes: Callable[..., Any] | None = None  # large inputs at kernel-size boundaries (structured): sizes
    layouts: Callable[..., Any] = inputs_in_layouts  # (inputs, layouts by role): layout-invariant
    # optimizers
    hyperparameters: Callable[[], Any] | None = None  # valid hyperparameters for sparse gradients
    param_groups: Callable[..., Any] | None = None  # two param groups: param-groups
    resume_points: Callable[..., Any] | None = None  # (param groups, the step to save at): state-dict-resume
    lifecycles: Callable[..., Any] | None = None  # lifecycle
    complex: Callable[..., Any] | None = None  # complex-agrees
    long_trajectories: Callable[..., Any] | None = None  # long-trajectory
    paths: Callable[..., Any] | None = None  # sparse, mixed and densified trajectories: paths-agree
    dense: Callable[..., Any] | None = None  # densified trajectories: compiled-agrees, grad-scaling


@dataclass(frozen=True)
class Drawing:
    """One of an op's :class:`Strategies` bound to the op: ``dtype -> a strategy`` (what a
    :class:`GeneratedProperty` draws from); equal for the same op and strategy."""

    op: Any
    strategy: Callable[..., Any] | None  # None: the op declares no such strategy (an item of it cannot draw)

    def __call__(self, dtype: str, **options: Any) -> Any:
        assert self.strategy is not None, f"op {getattr(self.op, 'name', self.op)!r} declares no such strategy"
        return self.strategy(self.op, dtype, **options)


FOREACH, FUSED, COMPILED = "foreach", "fused", "compiled"  # torch's own paths beside its for-loop step
FOR_LOOP = "for-loop"  # TorchPath.on_sparse: torch runs its for-loop step on a sparse gradient instead
REFUSES = "refuses"  # TorchPath.on_sparse: torch raises RuntimeError on a sparse gradient


@dataclass(frozen=True)
class TorchPath:
    """One of torch's own code paths of an op beside its default, run as the backend of its ``name``
    (foreach and fused: conformance/backends/torch_paths.py; compiled: conformance/backends/compiled.py)."""

    name: str  # FOREACH, FUSED or COMPILED
    # an optimizer: the constructor keywords that select the path (compiled: those of the step compiled)
    keywords: Mapping[str, Any] = field(default_factory=dict)
    function: Callable[..., Any] | None = None  # another op: the function torch.compile compiles
    on_sparse: str | None = None  # what the path does with a sparse gradient: FOR_LOOP, REFUSES, None (runs it)
    # devices where it matches the for-loop step bit for bit in float32/float64 (the same arithmetic, tensor
    # by tensor: foreach on cpu); elsewhere within the agreement tolerance (another order of the arithmetic)
    bit_exact_on: tuple[str, ...] = ()
    # the generated properties that judge the path (TWIN_PROPERTIES: an optimizer record's paths declare
    # them; OptimizerOp.all_properties makes one item per property and backend); none: judged by the rest
    twins: tuple[str, ...] = ()


def code(default: Callable[..., Any]) -> Any:
    """A field of an op record that is code: a function the declaration names (``reference=coalesce_reference``),
    called as the record's method (``op.reference(inputs)``). A function whose first parameter is ``op`` is
    handed the record first, as ``OpInfo``'s ``sample_inputs_func`` is handed the OpInfo; any other is called
    with the arguments alone. ``default``: what a record that names none does (it takes ``op``)."""
    return field(default=default, repr=False, metadata={CODE: True})


def _assert_close_default(op: "Op", inputs: Any) -> ErrorBound:
    """A spec case's bound against the reference where the record declares none: assert_close's default."""
    return ErrorBound.times_default(1.0)


@dataclass(frozen=True, eq=False, kw_only=True)
class Op:
    """An op under test, declared: ``OP = Op(name=..., ...)`` in one module of ``conformance.ops`` (an optimizer:
    :class:`conformance.ops.optimizers.base.OptimizerOp`). Its fields are data (schemas, outputs, paths,
    strategies, divergences) and a small set of code (:func:`code`: the reference, decoding and encoding, the
    candidate driving, bounds, properties), each named by the declaration. Checked as it is made
    (:mod:`conformance.ops.declared`): an unknown, misspelt, mistyped or inconsistent field is an InvalidRecord
    (a TypeError) naming it, as torch's ``OpInfo`` refuses an unknown keyword. Every dtype is its spec name
    (``"float16"``; facts and the torch dtype: :mod:`conformance.core.dtypes`). Compared by identity."""

    name: str
    summary: str = ""
    candidate_contract: str = ""
    inputs_schema: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    expected_schema: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    exact_outputs: frozenset[str] = frozenset()
    # whether error_bounds reads the rounding sensitivity (conformance.core.tolerances.rounding_sensitivity:
    # torch's algorithm replayed in the dtype against the reference); computed only for a record that says so
    rounding_sensitive: bool = False
    # stock torch sums the duplicates of a float16/bfloat16 COO tensor in that dtype (pytorch#84471)
    torch_sums_duplicates_in_half: bool = False
    # stock torch's other known half-precision arithmetic, as rounds-correctly judges it: (the registered
    # Divergence, rounding_bounds keywords that model it); an output outside the correctly rounded bounds
    # but inside the model's, where the divergence applies, is that divergence (conformance/cases/checks.py)
    torch_rounding_models: tuple[tuple[Divergence, dict[str, Any]], ...] = ()
    # optimizers: output name -> the optimizer's state key it is read from (empty: not an optimizer)
    state_outputs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # optimizers: outputs read after the steps as sqrt(a state output) + a hyperparameter, at the last
    # gradient's coalesced indices (every entry, flattened, for a dense gradient): output -> (state
    # output, hyperparameter, its default) -- Adagrad's std, as the tutorial prints it. The candidate
    # driving (OptimizerOp.add_root_outputs) and the counterexample scripts (repro/run/optimizer.py.j2) read them
    root_outputs: Mapping[str, tuple[str, str, float]] = field(default_factory=lambda: MappingProxyType({}))
    # the built-in backend that is stock torch's own way of doing this op: the column a candidate is
    # read against in reports, run beside it by `conformance check`
    stock_backend: str | None = None
    # stock torch's implementation of this op, in the form run_candidate drives (None: no single torch
    # function does it); a candidate is also judged against what it returns
    torch_implementation: Any = None
    # the input space's dimensions (DIMENSIONS) the op has no property for, each with the reason
    dimensions_left_out: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # whether decode_expected reads an empty multi-dim output's {fill, shape} (else encode_expected leaves it out)
    decodes_empty_expected: bool = False
    # known mistakes in implementing the op (conformance.core.diagnosis.Mistake): what a failing output
    # "looks like", named in the failure, its record and the report
    mistakes: tuple = ()
    # each input the op's examples hand over as a tensor, by role (RunContext.place), -> the memory layouts
    # it may take (conformance.core.layouts.LAYOUT_KINDS, contiguous first: what Hypothesis shrinks toward);
    # empty: the op has no layout-invariant property
    input_layouts: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    # outputs a correct implementation may compute in another order on a non-contiguous input (a reduction):
    # layout-invariant compares them within the agreement tolerance, every other output bit for bit
    layout_reordered_outputs: frozenset[str] = frozenset()
    # torch's own paths of the op (TorchPath), each run as a backend of its name beside stock torch's default
    torch_paths: tuple[TorchPath, ...] = ()
    # the Hypothesis strategies its properties draw from (none: the op has no generated property)
    strategies: Strategies = Strategies()

    # -- code (each a function the declaration names; see code()) --
    # spec inputs -> NumPy inputs, floats rounded to the dtype (raises ValueError): (raw, dtype) -> inputs
    decode_inputs: Callable[..., Any] = code(defaults.no_decode_inputs)
    # spec golden values -> NumPy arrays keyed by output name: (raw) -> outputs
    decode_expected: Callable[..., Any] = code(defaults.decode_expected)
    # decoded inputs back in spec notation (decode_inputs of the result gives them back): (inputs) -> raw
    encode_inputs: Callable[..., Any] = code(defaults.no_encode_inputs)
    # the independent NumPy float64 oracle (no torch math; run with NumPy's floating-point warnings off, so the
    # documented non-finite cases, 0/0 and inf - inf, print none): (inputs) -> outputs
    reference: Callable[..., Any] = code(defaults.no_reference)
    # the documented algorithm's value where the reference raises as torch does by a limitation of torch, not
    # by the contract (a spec's expected_error of kind torch-limitation): (inputs) -> outputs; default: reference
    reference_beyond_torch: Callable[..., Any] = code(defaults.reference_itself)
    # properties every correct output has, whatever the inputs (raise Mismatch): (outputs, inputs) -> None
    check_invariants: Callable[..., Any] = code(defaults.no_invariants)
    # drive a user-supplied implementation of this op through its contract: (candidate, inputs, ctx) -> outputs
    run_candidate: Callable[..., Any] = code(defaults.no_candidate_driving)
    # why a candidate cannot fit this op's contract, or None: (candidate) -> str | None
    candidate_problem: Callable[..., Any] = code(defaults.callable_problem)
    # the candidate wrapped in the checks of the contract beyond the numbers, which run_candidate then drives
    # (the candidate backend's, every call): a clause broken raises ``contract violated (<op>: <clause>):
    # <detail>`` (conformance.ops.contract): (candidate) -> the candidate watched; default: itself
    watch_candidate: Callable[..., Any] = code(defaults.candidate_itself)
    # float16/bfloat16: per output, (exact, low, high) -- the float64 result and the interval a correct
    # implementation's value lies in before its last rounding to the dtype (conformance.core.rounding), sums
    # accumulated at accumulation_unit (float32's unit roundoff; the dtype's own models torch's half-precision
    # accumulation): (inputs, dtype, accumulation_unit=OPMATH_ROUNDOFF) -> bounds; empty: no such model
    rounding_bounds: Callable[..., Any] = code(defaults.no_rounding_bounds)
    # per-output error bound (conformance.core.tolerances.ErrorBound; None: exact) of a dtype backend against
    # the float64 reference on generated inputs: the usual bounds of the arithmetic a correct implementation
    # does in the dtype times a small safety factor; a pure function of its arguments (conformance.core.tolerances
    # makes the tolerances of them). sensitivity: where rounding_sensitive, how far torch's algorithm replayed in
    # the dtype lands from the reference, per output; empty otherwise: (inputs, dtype, sensitivity) -> bounds
    error_bounds: Callable[..., Any] = code(defaults.no_error_bounds)
    # inputs for a spec's benchmark section (size, density, sparse_dims, steps, hyperparameters), drawn from the
    # NumPy generator rng: (bench, rng, dtype) -> inputs
    benchmark_inputs: Callable[..., Any] = code(defaults.no_benchmark_inputs)
    # where torch_sums_duplicates_in_half: the outputs of stock torch's half-precision accumulation of duplicates
    # in each order an implementation commonly sums them in, by the order's name: (inputs, dtype) -> models
    half_accumulation_models: Callable[..., Any] = code(defaults.no_models)
    # stock torch's result computed the way torch rounds in the dtype, duplicates summed at accumulate, and the
    # flags of what that rounding did ("accumulation", "underflow"): (inputs, dtype, accumulate) ->
    # (outputs, flags), or None where the op has no such model (conformance/cases/lowprec.py judges from it)
    half_precision_model: Callable[..., Any] = code(defaults.no_half_precision_model)
    # the generated properties of this op (GeneratedProperty) beside the ones every op has: () -> properties
    properties: Callable[..., Any] = code(defaults.no_properties)
    # inputs every property drawn from strategies.inputs runs first (Hypothesis' explicit examples): small
    # hand-written inputs on which the known mistakes differ: (dtype) -> [inputs]
    explicit_examples: Callable[..., Any] = code(defaults.no_examples)
    # inputs the property sizes runs first (the boundaries themselves): (dtype) -> [inputs]
    sizes_examples: Callable[..., Any] = code(defaults.no_examples)
    # (inputs, layouts by role) layout-invariant runs first: (dtype) -> [(inputs, layouts)]
    layout_examples: Callable[..., Any] = code(defaults.explicit_in_layouts)
    # the sizes of the inputs in words, as a failure of the property sizes names them: (inputs) -> str
    describe_size: Callable[..., Any] = code(defaults.sizes_in_general)
    # a spec case's bound against the NumPy reference, for every output (an ErrorBound, usually
    # ErrorBound.times_default(k): assert_close's dtype default k times looser): (inputs) -> ErrorBound
    reference_error_bound: Callable[..., Any] = code(_assert_close_default)

    def __new__(cls, *args: Any, **declared: Any) -> Any:
        """Refuse a field the record's kind does not declare (naming it, and the declared name it is closest
        to), before the dataclass' own ``__init__`` would say less; note the module that declares the record."""
        declared_in = _declaring_module()
        check_names(cls, declared, declared_in, positional=args)
        record = super().__new__(cls)
        object.__setattr__(record, "_declared_in", declared_in)
        return record

    def __post_init__(self) -> None:
        """Check the declaration (:mod:`conformance.ops.declared`), then make each code field the record's
        method: handed the record first where its first parameter is ``op``; the references quiet."""
        check_record(self, paths=(FOREACH, FUSED, COMPILED), twins=TWIN_PROPERTIES, dimensions=tuple(DIMENSIONS))
        for spec in fields(self):
            if not spec.metadata.get(CODE):
                continue
            function = getattr(self, spec.name)
            if isinstance(function, MethodType) and isinstance(function.__self__, Op):
                function = function.__func__  # (dataclasses.replace hands the bound method back)
            bound = takes_op(function)
            if spec.name in ("reference", "reference_beyond_torch") and not getattr(function, "quiet", False):
                function = _quiet_numpy(function)
            object.__setattr__(self, spec.name, MethodType(function, self) if bound else function)

    def drawing(self, strategy: Callable[..., Any] | None) -> Drawing:
        """``strategy`` (one of :attr:`strategies`) bound to this op, as a property draws from it."""
        return Drawing(self, strategy)

    def torch_path(self, name: str) -> TorchPath | None:
        """The declared path ``name``, or None."""
        return next((path for path in self.torch_paths if path.name == name), None)

    @property
    def record_file(self) -> str:
        """The module that declares the record, as a path from the repository root (``conformance/ops/coalesce.py``)."""
        return getattr(self, "_declared_in", type(self).__module__).replace(".", "/") + ".py"

    def computed_outputs(self) -> dict[str, str]:
        """The outputs the suite computes from a candidate's others instead of reading them off it
        (:attr:`root_outputs`: Adagrad's std, ``sqrt(state_sum) + eps``), each with how."""
        return {name: f"sqrt({state}) + {hyperparameter}"
                for name, (state, hyperparameter, _) in self.root_outputs.items()}

    @property
    def state_tensors(self) -> tuple[str, ...]:
        """The state outputs that are tensors of the parameter's shape (``step`` left out)."""
        return tuple(name for name in self.state_outputs if name != "step")

    def encode_expected(self, outputs: dict) -> dict:
        """Golden values in spec notation; empty multi-dim outputs are left out unless
        :attr:`decodes_empty_expected` (they carry no information)."""
        expected: dict[str, Any] = {}
        for name in self.expected_schema.get("properties", {}):
            if name not in outputs:
                continue
            value = np.asarray(outputs[name])
            if value.ndim == 0:
                expected[name] = int(value) if name in self.exact_outputs else float(value)
            elif value.size == 0 and value.ndim > 1 and not self.decodes_empty_expected:
                continue
            elif name == "size":
                expected[name] = [int(v) for v in value.tolist()]
            else:
                expected[name] = encode_array(value)
        return expected

    def check_candidate_outputs(self, outputs: dict[str, Any], ctx: RunContext) -> None:
        """The contract's clauses on what :meth:`run_candidate` returned (raise as
        :meth:`watch_candidate` does). Default: none."""

    def regrouped_inputs(self, inputs: Any, dtype: str) -> list[Any]:
        """Inputs whose float64 reference outputs bound what summing duplicates in another order does to
        a correct implementation's outputs in ``dtype`` (the tolerances widen by how far those move);
        none by default."""
        return []

    def option_names(self) -> tuple[str, ...]:
        """The options an input may set (an optimizer's hyperparameters), which a candidate may
        declare it cannot do (``unsupported_options``): the generated search then draws them at
        torch's default (:meth:`at_torch_defaults`)."""
        return ()

    def at_torch_defaults(self, example: Any, options: frozenset[str]) -> Any:
        """``example`` (any property's example) with each of ``options`` left at torch's default."""
        return example

    def all_properties(self) -> tuple[GeneratedProperty, ...]:
        """:meth:`properties` and the ones every op has: ``deterministic`` (the same inputs run
        twice give bit-for-bit the same outputs and state), on ``strategies.inputs``; where the record
        declares :attr:`input_layouts`, ``layout-invariant`` (``strategies.layouts``); where it declares
        ``strategies.sizes``, ``sizes``."""
        own = tuple(self.properties())
        if any(p.name == "deterministic" for p in own) or self.strategies.inputs is None:
            return own  # (an op without an input strategy has nothing to draw)
        sizes = (GeneratedProperty(
            SIZES, "inputs past the sizes where kernels change behaviour (vector widths and block sizes: 16, 32, 64, "
            "256 entries and a remainder; hybrid rows wider than 256; half-precision counts past 2,048) agree with the "
            "NumPy reference", self.drawing(self.strategies.sizes), examples=self.sizes_examples,
            max_examples=SIZES_EXAMPLES),
        ) if self.strategies.sizes is not None else ()
        layouts = (GeneratedProperty(
            LAYOUT_INVARIANT, "the same inputs handed over as non-contiguous views (a strided view into a larger "
            "storage, transposed, channels_last) give bit for bit the result of contiguous copies, and no byte of "
            "the storage outside a view changes", self.drawing(self.strategies.layouts), examples=self.layout_examples,
            max_examples=LAYOUT_EXAMPLES),
        ) if self.input_layouts else ()
        return (*own, GeneratedProperty("deterministic", "the same inputs run twice give bit-for-bit the same "
                                        "outputs and state", self.drawing(self.strategies.inputs)), *layouts, *sizes)

    def spec_can_hold(self, inputs: Any) -> bool:
        """Whether a spec case can hold ``inputs`` (a counterexample is written as a spec only then)."""
        return True

    @property
    def is_optimizer(self) -> bool:
        """Whether a candidate is a ``torch.optim.Optimizer`` class (the optimizer properties and
        contract checks apply)."""
        return False
