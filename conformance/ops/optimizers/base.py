"""``OptimizerOp``: what the optimizer records share -- decoding and encoding, the candidate
driving, the generated properties and their strategies, benchmark trajectories and the frame of the
half-precision model. An optimizer's record (a module of this package) is one declaration of it,
``OP = OptimizerOp(name=..., ...)``."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np
import torch
from hypothesis import strategies as st

from conformance.core.dtypes import DTYPES
from conformance.core.layouts import CONTIGUOUS, LAYOUT_KINDS, STRIDED, TRANSPOSED, layouts_strategy
from conformance.core.types import RunContext, Unsupported
from conformance.ops.base import (COMPILED, COMPILED_AGREES, FOREACH, FUSED, GRAD_SCALING, PATHS_AGREE, REFUSES,
                                  GeneratedProperty, Op, Strategies, TorchPath, code)
from conformance.ops.coalesce import coalesce_reference
from conformance.ops.optimizers.configurations import (CONFIGURATIONS, ConfigurationSpace, configuration_examples,
                                                      configurations)
from conformance.ops.optimizers import examples
from conformance.ops.optimizers.contract import check_optimizer_outputs, watch_optimizer
from conformance.ops.optimizers.drive import optimizer_problem, run_optimizer
from conformance.ops.optimizers.inputs import (LifecycleInputs, OptimizerInputs, ParamGroupsInputs,
                                               optimizer_benchmark_inputs)
from conformance.ops.optimizers.reference import densified, duplicate_sums_shifted
from conformance.ops.optimizers.strategies import (LONG_EXAMPLES, LONG_STEPS, complex_trajectories, drawn_inputs, lifecycles, sized_inputs, long_trajectories, param_groups,
                                                   resume_points, rounding_inputs)
from conformance.core.tensors import CooArray, encode_array, encode_coo, quantize


COMPILED_EXAMPLES = 3  # drawn examples per compiled-agrees item: each one compiles the step (seconds of C++)


def paths_inputs(op: "OptimizerOp", dtype: str) -> Any:
    """Drawn trajectories, or the same densified (torch's fused steps run dense gradients only): paths-agree."""
    assert op.strategies.inputs is not None  # (OPTIMIZER_STRATEGIES declares it)
    drawn = op.strategies.inputs(op, dtype)
    return st.one_of(drawn, drawn.map(lambda inputs: densified(inputs, dtype)))


def dense_inputs(op: "OptimizerOp", dtype: str) -> Any:
    """Drawn trajectories densified (torch.compile does not trace sparse gradients): compiled-agrees, grad-scaling."""
    assert op.strategies.inputs is not None  # (OPTIMIZER_STRATEGIES declares it)
    return op.strategies.inputs(op, dtype).map(lambda inputs: densified(inputs, dtype))


def paths_inputs_in_layouts(op: "OptimizerOp", dtype: str) -> Any:
    """Trajectories as paths-agree draws them, each input in a drawn layout: layout-invariant."""
    return st.tuples(paths_inputs(op, dtype), layouts_strategy(op.input_layouts))


# the constructor keywords of torch's for-loop step, for an optimizer with foreach and fused steps too
FOR_LOOP_KEYWORDS = MappingProxyType({"foreach": False, "fused": False})


def foreach_fused_compiled(*, foreach_on_sparse: str | None = None) -> tuple[TorchPath, ...]:
    """torch's own paths of an optimizer with foreach and fused steps (torch 2.13's Adagrad and SGD), each
    twinned with its for-loop step: foreach (the same arithmetic tensor by tensor: bit for bit on cpu; on a
    sparse gradient it does ``foreach_on_sparse``), fused (refuses a sparse gradient; takes GradScaler's
    grad_scale and found_inf), compiled (the for-loop step under torch.compile, against itself run eagerly)."""
    return (TorchPath(FOREACH, {"foreach": True}, on_sparse=foreach_on_sparse, bit_exact_on=("cpu",),
                      twins=(PATHS_AGREE,)),
            TorchPath(FUSED, {"fused": True}, on_sparse=REFUSES, twins=(PATHS_AGREE, GRAD_SCALING)),
            TorchPath(COMPILED, {"foreach": False}, twins=(COMPILED_AGREES,)))


# what every optimizer draws; a record adds its own hyperparameters and invalid inputs (dataclasses.replace)
OPTIMIZER_STRATEGIES = Strategies(
    inputs=drawn_inputs, rounding=rounding_inputs, sizes=sized_inputs, layouts=paths_inputs_in_layouts,
    param_groups=param_groups, resume_points=resume_points, lifecycles=lifecycles, complex=complex_trajectories,
    long_trajectories=long_trajectories, paths=paths_inputs, dense=dense_inputs)




def optimizer_run_candidate(op: "OptimizerOp", candidate, inputs: "OptimizerInputs", ctx: RunContext) -> dict[str, Any]:
    """The candidate optimizer stepped through the trajectory; the outputs are the parameter
    and the state keys the record names (``state_outputs``), then the :attr:`root_outputs`."""
    return op.add_root_outputs(run_optimizer(candidate, inputs, ctx, op.state_outputs), inputs)


def optimizer_watch_candidate(op: "OptimizerOp", candidate: Any) -> Any:
    """The optimizer contract's ``step()`` and state clauses (:mod:`.contract`)."""
    return watch_optimizer(op, candidate)


def _no_hyperparameters(op: "OptimizerOp", given: dict) -> dict:
    """``given`` with torch's defaults filled in, after torch's constructor checks (ValueError
    with torch's messages): what the torch backends' runners step with."""
    raise NotImplementedError(f"optimizer record {op.name!r} declares no hyperparameters (torch's defaults and "
                              "constructor checks)")


def _no_dense_steps(op: "OptimizerOp", hyperparameters: dict) -> bool:
    """Whether a trajectory with these hyperparameters may mix dense gradients in."""
    return False


def _no_rounding_hyperparameters(op: "OptimizerOp", draw) -> dict:
    """Hyperparameters besides ``lr`` for the rounds-correctly inputs."""
    return {}


def optimizer_encode_inputs(op: "OptimizerOp", inputs: OptimizerInputs) -> dict:
    if isinstance(inputs, LifecycleInputs):  # (what a failure shows; no spec case takes a lifecycle yet)
        return {"lifecycle": inputs.events(),
                "members": [{"param": encode_array(m.param), "start": m.start, "frozen": m.frozen, "dtype": m.dtype,
                             "grads": [None if g is None else op.encode_inputs(
                                 OptimizerInputs(m.param, [g]))["grads"][0] for g in m.grads]}
                            for m in inputs.members],
                "hyperparameters": op.encode_inputs(OptimizerInputs(np.zeros(0), [], inputs.hyperparameters)).get(
                    "hyperparameters", {}),
                "lr_scales": list(inputs.lr_scales), "tensor_lr": inputs.tensor_lr,
                "lr_in_place": inputs.lr_in_place, "resume_after": inputs.resume_after}
    hyper = {}
    for key, value in inputs.hyperparameters.items():
        hyper[key] = [float(v) for v in value] if isinstance(value, (tuple, list)) else (
            bool(value) if isinstance(value, (bool, np.bool_)) else float(value))
    raw = {"param": encode_array(inputs.param),
           "grads": [encode_coo(g) if isinstance(g, CooArray) else {"dense": encode_array(g)}
                     for g in inputs.grads]}
    if hyper:
        raw["hyperparameters"] = hyper
    return raw


def optimizer_initial_state(op: "OptimizerOp", inputs: OptimizerInputs) -> dict[str, np.ndarray]:
    """The documented parameter and state tensors before the first step (float64), for state
    an optimizer creates only at its first step (see :meth:`state_before_steps`)."""
    return {"param": inputs.param, **{name: np.zeros(inputs.param.shape) for name in op.state_tensors}}


def optimizer_properties(op: "OptimizerOp") -> tuple[GeneratedProperty, ...]:
    names = ["param", *op.state_tensors]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return (
        GeneratedProperty("agrees-with-reference", f"{op.title} trajectories match the NumPy reference",
                          op.drawing(op.strategies.inputs)),
        GeneratedProperty("unspecified-unchanged", f"entries a step's gradient does not specify keep {listed} "
                          "bit-for-bit", op.drawing(op.strategies.inputs)),
        GeneratedProperty("rejects-invalid", op.invalid_summary, op.drawing(op.strategies.invalid)),
        GeneratedProperty("param-groups", "one optimizer over two param groups (different shapes and "
                          "hyperparameters, a parameter without a gradient) moves each parameter as an optimizer "
                          "of its own would", op.drawing(op.strategies.param_groups)),
        GeneratedProperty("state-dict-resume", "state_dict() saved mid-trajectory (torch.save/torch.load) and "
                          "loaded into a fresh optimizer continues exactly as the uninterrupted run",
                          op.drawing(op.strategies.resume_points)),
        GeneratedProperty("lifecycle", "one optimizer over parameters that miss gradients on some steps, are "
                          "frozen, 0-d or zero-size, join by add_param_group mid-run, with lr changed between "
                          "steps or a 0-d tensor and a weights_only state_dict round trip, moves each parameter "
                          "as an optimizer of its own stepped where it has a gradient", op.drawing(op.strategies.lifecycles),
                          examples=op.lifecycle_examples),
        GeneratedProperty("complex-agrees", f"{op.title} on complex parameters (complex64 for float32 items, "
                          "complex128 for float64) equals itself on their torch.view_as_real, as torch documents "
                          "(or refuses them as torch does)", op.drawing(op.strategies.complex), dtypes=("float32", "float64"),
                          examples=op.complex_examples),
        GeneratedProperty("rounds-correctly", "a float16/bfloat16 parameter moved by a fraction of an ulp to a "
                          "few ulps is correctly rounded", op.drawing(op.strategies.rounding)),
        GeneratedProperty("long-trajectory", f"{op.title} over {LONG_STEPS[0]}-{LONG_STEPS[1]} steps matches the "
                          "NumPy reference within a tolerance that grows with the steps (a hyperparameter rounded "
                          "once per step drifts)", op.drawing(op.strategies.long_trajectories), dtypes=("float32", "float64"),
                          examples=op.long_trajectory_examples, max_examples=LONG_EXAMPLES),
        *op._configurations_property(),
    )




def optimizer_describe_size(op: "OptimizerOp", inputs: OptimizerInputs) -> str:
    shape = tuple(np.shape(inputs.param))
    if len(shape) == 2:
        return f"a parameter of {shape[0]} rows of {shape[1]} entries (hybrid rows wider than 256)"
    return f"a parameter of {int(np.prod(shape))} entries"


def optimizer_half_precision_model(op: "OptimizerOp", inputs: OptimizerInputs, dtype: str, accumulate: str):
    """torch's sparse (and dense) branch replayed, rounding to ``dtype`` where torch stores a tensor."""
    flags: set = set()
    return op.replay_in_dtype(inputs, dtype, flags, accumulate), flags


def _no_replay(op: "OptimizerOp", inputs: OptimizerInputs, dtype: str, flags: set, accumulate: str) -> dict[str, np.ndarray]:
    """torch's steps on ``inputs`` with every stored tensor rounded to ``dtype`` (duplicates
    summed at ``accumulate``), adding "accumulation"/"underflow" to ``flags`` where they occur."""
    raise NotImplementedError(f"optimizer record {op.name!r} declares no replay_in_dtype (torch's steps in the dtype)")


@dataclass(frozen=True, eq=False, kw_only=True)
class OptimizerOp(Op):
    """What the optimizer records share: generated inputs and properties, benchmark trajectories
    and the half-precision model's frame; each optimizer gives its hyperparameters and its documented
    errors (``strategies``: :data:`OPTIMIZER_STRATEGIES` with its ``hyperparameters`` and ``invalid``)
    and its replay of torch's steps (:meth:`replay_in_dtype`)."""

    title: str = ""  # the optimizer's class name, as summaries write it
    invalid_summary: str = ""  # what the rejects-invalid property draws
    # hyperparameters of the explicit examples (see examples.explicit_examples); none: no explicit example
    explicit_hyperparameters: tuple[dict, ...] = ()
    # hyperparameters of the long-trajectory property's explicit examples: where a hyperparameter
    # rounded to float32 once per step drifts past the tolerance (see long_trajectory_examples)
    long_trajectory_hyperparameters: tuple[dict, ...] = ()
    # the constructor keywords of torch's for-loop step (its paths, Op.torch_paths, are twinned with it)
    torch_for_loop: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({"foreach": False}))
    # the layouts each tensor the optimizer is handed may take (layout-invariant; conformance/core/layouts.py)
    input_layouts: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({
        "param": LAYOUT_KINDS, "grad": LAYOUT_KINDS, "grad.indices": (CONTIGUOUS, STRIDED, TRANSPOSED),
        "grad.values": LAYOUT_KINDS}))
    # hyperparameters of layout-invariant's explicit examples (layout_examples)
    layout_hyperparameters: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({"lr": 0.5}))
    # steps of the long-trajectory property's explicit examples (long_trajectory_examples)
    long_trajectory_steps: int = LONG_STEPS[1]
    # hyperparameters of the lifecycle property's explicit examples (lifecycle_examples)
    lifecycle_hyperparameters: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({"lr": 0.5}))
    # the hyperparameters worth testing and the step kinds, covered pairwise by the configurations property
    # (conformance/ops/optimizers/configurations.py); None: the record has no configurations property
    configuration_space: ConfigurationSpace | None = None
    # torch's RuntimeError messages for what its step refuses, raised the same way by every backend's runner:
    # weight_decay with a sparse gradient (None: it takes them), and a dense gradient (None: it takes them)
    sparse_weight_decay_error: str | None = None
    dense_gradient_error: str | None = None
    # the trajectory's error bounds widen by torch's algorithm replayed in the dtype (ill-conditioned steps)
    rounding_sensitive: bool = True
    strategies: Strategies = OPTIMIZER_STRATEGIES  # each optimizer adds its hyperparameters and invalid inputs

    # -- code: an optimizer's own (see conformance.ops.base.code) --
    # the given hyperparameters with torch's defaults filled in, after torch's constructor checks (ValueError
    # with torch's messages): what the torch backends' runners step with: (given) -> hyperparameters
    hyperparameters: Callable[..., Any] = code(_no_hyperparameters)
    # whether a trajectory with these hyperparameters may mix dense gradients in: (hyperparameters) -> bool
    accepts_dense_steps: Callable[..., Any] = code(_no_dense_steps)
    # hyperparameters besides lr for the rounds-correctly inputs: (draw) -> hyperparameters
    rounding_hyperparameters: Callable[..., Any] = code(_no_rounding_hyperparameters)
    # the documented parameter and state tensors before the first step (float64), for state an optimizer
    # creates only at its first step (state_before_steps): (inputs) -> arrays
    initial_state: Callable[..., Any] = code(optimizer_initial_state)
    # torch's steps on the inputs with every stored tensor rounded to the dtype (duplicates summed at accumulate),
    # adding "accumulation"/"underflow" to flags where they occur: (inputs, dtype, flags, accumulate) -> outputs
    replay_in_dtype: Callable[..., Any] = code(_no_replay)
    # -- what every optimizer shares of Op's code --
    decode_inputs: Callable[..., Any] = code(OptimizerInputs.decode)
    encode_inputs: Callable[..., Any] = code(optimizer_encode_inputs)
    run_candidate: Callable[..., Any] = code(optimizer_run_candidate)
    candidate_problem: Callable[..., Any] = code(optimizer_problem)  # a torch.optim.Optimizer class, or why not
    watch_candidate: Callable[..., Any] = code(optimizer_watch_candidate)
    # the explicit examples of each dimension (conformance/ops/optimizers/examples.py): (dtype) -> [inputs]
    explicit_examples: Callable[..., Any] = code(examples.explicit_examples)
    sizes_examples: Callable[..., Any] = code(examples.sizes_examples)
    layout_examples: Callable[..., Any] = code(examples.layout_examples)
    grad_scaling_examples: Callable[..., Any] = code(examples.grad_scaling_examples)
    complex_examples: Callable[..., Any] = code(examples.complex_examples)
    lifecycle_examples: Callable[..., Any] = code(examples.lifecycle_examples)
    long_trajectory_examples: Callable[..., Any] = code(examples.long_trajectory_examples)
    describe_size: Callable[..., Any] = code(optimizer_describe_size)
    benchmark_inputs: Callable[..., Any] = code(optimizer_benchmark_inputs)
    half_precision_model: Callable[..., Any] = code(optimizer_half_precision_model)
    properties: Callable[..., Any] = code(optimizer_properties)

    @property
    def takes_dense_gradients(self) -> bool:
        """Whether the optimizer steps dense gradients (it declares no ``dense_gradient_error``): the explicit
        examples of the layouts, complex, sizes and lifecycle dimensions step dense gradients where it does
        (torch's fused steps run dense gradients only), sparse ones otherwise, and drawn trajectories mix them."""
        return self.dense_gradient_error is None

    @property
    def is_optimizer(self) -> bool:
        return True

    def add_root_outputs(self, outputs: dict[str, Any], inputs: OptimizerInputs) -> dict[str, Any]:
        """``outputs`` (a run's, with the state tensors) with each of :attr:`root_outputs` added."""
        last = inputs.grads[-1] if inputs.grads else None
        for name, (state_output, hyperparameter, default) in self.root_outputs.items():
            state = outputs[state_output]
            if not isinstance(state, torch.Tensor) or tuple(state.shape) != tuple(np.shape(inputs.param)):
                continue  # a candidate's state of another shape: the contract check (check_optimizer_outputs) names it
            plus = inputs.hyperparameters.get(hyperparameter, default)
            if isinstance(last, CooArray):
                index = torch.from_numpy(coalesce_reference(last)["indices"]).to(state.device)
                outputs[name] = state[tuple(index)].sqrt() + plus
            elif last is not None:
                outputs[name] = state.flatten().sqrt() + plus
        return outputs

    def check_candidate_outputs(self, outputs: dict[str, Any], ctx: RunContext) -> None:
        check_optimizer_outputs(self, outputs, ctx)

    def option_names(self) -> tuple[str, ...]:
        """The hyperparameters of the inputs schema."""
        return tuple(self.inputs_schema.get("properties", {}).get("hyperparameters", {}).get("properties", {}))

    def at_torch_defaults(self, example: Any, options: frozenset[str]) -> Any:
        """``example`` without the hyperparameters ``options`` names: the optimizer's constructor
        (and the reference) then use torch's defaults. Walks OptimizerInputs, ParamGroupsInputs and
        tuples of them (state-dict-resume's (inputs, step))."""
        if isinstance(example, OptimizerInputs):
            if not options & set(example.hyperparameters):
                return example
            return OptimizerInputs(example.param, example.grads,
                                   {k: v for k, v in example.hyperparameters.items() if k not in options})
        if isinstance(example, ParamGroupsInputs):
            return ParamGroupsInputs([[self.at_torch_defaults(m, options) for m in group] for group in example.groups])
        if isinstance(example, tuple):
            return tuple(self.at_torch_defaults(part, options) for part in example)
        return example

    def state_before_steps(self, run, inputs: OptimizerInputs) -> dict[str, Any]:
        """The parameter and each state tensor before the first step, *read* from the
        implementation: ``run`` (a backend's or candidate's run of this op) on the same parameter
        and hyperparameters with no step at all, which constructs the optimizer and reads its
        state as :func:`read_state` reads it after steps. A state entry the optimizer creates
        only at its first step (torch's SparseAdam and Adam: lazily) cannot be read before it; for
        those :meth:`initial_state` gives the documented starting value, rounded to the dtype the
        implementation creates that entry in (read after its first step): an accumulator started
        at 0.1 in float32 holds 0.10000000149011612, never the float64 0.1."""
        try:
            before = run(OptimizerInputs(inputs.param, [], inputs.hyperparameters))
        except Unsupported:
            raise
        except Exception:  # noqa: BLE001 - lazily created state (Mismatch: no such entry yet), or no zero-step run
            before = {}
        lazy = [name for name in ("param", *self.state_tensors) if name not in before]
        if not lazy:
            return {name: before[name] for name in ("param", *self.state_tensors)}
        documented = self.initial_state(inputs)
        created = self._state_as_created(run, inputs, lazy)
        state = dict(before)
        for name in lazy:
            dtype = getattr(created.get(name), "dtype", None)
            state[name] = quantize(documented[name], dtype) if isinstance(dtype, torch.dtype) else documented[name]
        return {name: state[name] for name in ("param", *self.state_tensors)}

    @staticmethod
    def _state_as_created(run, inputs: OptimizerInputs, names: list[str]) -> dict[str, Any]:
        """The lazily created state entries ``names`` after the first step, for their dtype; {} where
        that step does not run (its own check reports why)."""
        if not inputs.grads:
            return {}
        try:
            return run(OptimizerInputs(inputs.param, inputs.grads[:1], inputs.hyperparameters))
        except Unsupported:
            raise
        except Exception:  # noqa: BLE001 - the property's own run of that step says what went wrong
            return {}

    def _configurations_property(self) -> tuple[GeneratedProperty, ...]:
        """configurations, where the record declares its space: the covering array's rows as explicit examples
        (every pair of settings, every triple of hyperparameter values), then drawn configurations. float32 and
        float64 (float16's eps of 1e-10 is 0: torch's recorded 0/0, which the other properties judge); not on the
        compiled backend (each configuration compiles; compiled-agrees is its twin)."""
        if self.configuration_space is None:
            return ()
        return (GeneratedProperty(CONFIGURATIONS, f"{self.title} in every pair of its settings (hyperparameters in "
                                  "combination, sparse, dense, mixed and empty steps) matches the NumPy reference",
                                  self.drawing(configurations), dtypes=("float32", "float64"),
                                  skip_backends=(COMPILED,),
                                  examples=lambda dtype: configuration_examples(self, dtype)),)

    def all_properties(self) -> tuple[GeneratedProperty, ...]:
        """Besides the rest, the twins its :attr:`torch_paths` declare (``TorchPath.twins``): ``paths-agree``
        (foreach, fused: each path against torch's for-loop step, conformance/cases/checks.py) on the drawn
        trajectories and the same densified (what the fused steps, which refuse sparse gradients, run);
        ``grad-scaling`` (fused: GradScaler's grad_scale and found_inf) on densified trajectories;
        ``compiled-agrees`` (the step under torch.compile against the same step run eagerly) on densified
        trajectories only (torch.compile does not trace sparse gradients), float32/float64,
        :data:`COMPILED_EXAMPLES` drawn examples an item (each compiles)."""
        def judged_by(twin: str) -> list[str]:
            return [path.name for path in self.torch_paths if twin in path.twins]

        twins = []
        if judged_by(PATHS_AGREE):
            twins.append(GeneratedProperty(
                PATHS_AGREE, f"torch's {' and '.join(judged_by(PATHS_AGREE))} {self.title} steps equal its for-loop "
                "step on the same trajectories (sparse, mixed and all-dense)", self.drawing(self.strategies.paths)))
        if judged_by(GRAD_SCALING):
            twins.append(GeneratedProperty(
                GRAD_SCALING, f"torch's {' and '.join(judged_by(GRAD_SCALING))} {self.title} step takes "
                "torch.amp.GradScaler's grad_scale and found_inf: scaled gradients step as unscaled ones, and a step "
                "with found_inf set changes neither the parameter nor any state (first or last)",
                self.drawing(self.strategies.dense), examples=self.grad_scaling_examples))
        if judged_by(COMPILED_AGREES):
            twins.append(GeneratedProperty(
                COMPILED_AGREES, f"torch's {self.title} step under torch.compile (Inductor) equals the same step "
                "run eagerly on the same dense-gradient trajectories", self.drawing(self.strategies.dense),
                dtypes=("float32", "float64"), max_examples=COMPILED_EXAMPLES))
        return (*super().all_properties(), *twins)

    def spec_can_hold(self, inputs: Any) -> bool:
        return not isinstance(inputs, LifecycleInputs)  # a lifecycle is not a spec case (yet)

    def regrouped_inputs(self, inputs: Any, dtype: str) -> list[OptimizerInputs]:
        """A sparse gradient's duplicates summed in another order than the reference's: each sum shifted
        by its bound in float32 (a correct implementation's accumulation for float32, float16 and
        bfloat16; exact enough in float64): the kernels' duplicates [128, 0, -128, 2.0000038] give
        2.0 in float32 where the sum is 2.0000038 (:func:`duplicate_sums_shifted`)."""
        if dtype == "float64" or not isinstance(inputs, OptimizerInputs):
            return []
        return duplicate_sums_shifted(inputs, DTYPES["float32"].unit_roundoff)
