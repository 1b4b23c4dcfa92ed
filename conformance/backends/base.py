"""What a backend is: a named set of op runners, each taking decoded inputs and a RunContext."""

from __future__ import annotations

from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, Callable, Collection, Mapping

from conformance.core.types import RunContext, Unsupported, missing_dtype_kernel, missing_kernel
from conformance.core.twins import COMPILED_AGREES, PATHS_AGREE


Runner = Callable[[Any, RunContext], dict[str, Any]]

__all__ = ["COMPILED_AGREES", "PATHS_AGREE", "Backend"]  # (the twins' names: conformance/core/twins.py)


class Backend:
    """A named implementation of some ops.

    ``runners`` maps an op name to ``runner(inputs, ctx) -> outputs``. ``devices`` lists the
    devices it runs on (None: every device). A runner raises :class:`Unsupported` for a dtype
    or device it does not handle.
    """

    name: str = ""
    description: str = ""
    devices: tuple[str, ...] | None = None
    lists_unimplemented_ops: bool = True  # items for ops it lacks, reported unsupported
    judged_against_torch: bool = False  # also compared with stock torch on every item (conformance.judging.verdict)
    is_oracle: bool = False  # the independent oracle (the NumPy reference): what the others are checked against
    # the generated properties this backend gets items of (None: every property that accepts it)
    generated_properties: tuple[str, ...] | None = None
    # its optimizer steps read optimizer.grad_scale and optimizer.found_inf (torch.amp.GradScaler's contract, as
    # torch's fused steps do): the property grad-scaling runs on it
    takes_grad_scaling: bool = False
    # it drives the very optimizer objects of another backend (kernel-triton: kernel's classes), which own the
    # param groups, the state dict and the lifecycle; only the step kernel differs: the properties of the
    # optimizer object (Property.needs_optimizer_object) are that backend's, not repeated on this one
    optimizer_object_twin: bool = False
    # its items' share of --conformance-timeout: > 1 where an item's own work is slow by nature
    # (a compiler run under the item's clock), so a loaded machine does not time it out
    timeout_factor: float = 1.0
    # one of torch's own code paths of the ops (foreach, fused, compiled; conformance/backends/torch_paths.py,
    # compiled.py): the twin property (``twin_property``) compares it with torch's for-loop step on the same
    # inputs (``run_for_loop``); None: not one of torch's paths
    torch_path: str | None = None
    twin_property: str = PATHS_AGREE  # the property its registered divergences name
    # device -> the most drawn examples of its generated items there, where this backend emulates the
    # device rather than runs on it (kernel-triton on cpu: Triton's interpreter, ~40 ms an example); the
    # run's count on the other devices, and everywhere once --conformance-examples names one
    emulated_examples: Mapping[str, int] = MappingProxyType({})

    def __init__(self, runners: Mapping[str, Runner] | None = None):
        self.runners: dict[str, Runner] = dict(runners or {})

    def runs_on(self, device: str) -> bool:
        return self.devices is None or device in self.devices

    def implements(self, op: str) -> bool:
        return op in self.runners

    def run(self, op: str, inputs: Any, ctx: RunContext) -> dict[str, Any]:
        runner = self.runners.get(op)
        if runner is None:
            raise Unsupported(f"backend {self.name!r} does not implement op {op!r}")
        return runner(inputs, ctx)

    def candidate(self, op: str) -> Any | None:
        """The user's object that implements ``op`` (a class or a function), for a backend that runs one
        (conformance/backends/candidate.py); None for the others."""
        return None

    def optimizer_class(self, op: str) -> Callable[..., Any] | None:
        """The ``torch.optim.Optimizer`` class (or constructor) this backend's ``op`` runs, for the
        properties that need one optimizer object: several param groups, a state_dict round trip.
        None for a backend that computes the steps some other way."""
        return None

    def drive_optimizer(self, op: str, ctx: RunContext, use: Callable[[Callable[..., Any]], Any]) -> Any:
        """``use(optimizer_class)`` in whatever setting the backend runs its optimizer in."""
        optimizer_class = self.optimizer_class(op)
        if optimizer_class is None:
            raise Unsupported(f"backend {self.name!r} drives no optimizer object for {op!r}")
        return use(optimizer_class)

    def run_for_loop(self, op: str, inputs: Any, ctx: RunContext) -> dict[str, Any]:
        """Where ``torch_path`` is set: torch's for-loop step of ``op`` on the same inputs, the path's twin."""
        raise Unsupported(f"backend {self.name!r} is not one of torch's paths: it has no for-loop twin")

    def warm_up(self, devices: Collection[str]) -> bool:
        """Start slow one-time setup that this backend's items on ``devices`` need (compiling its
        kernels) in the background, and say whether it has any: then its items run after the
        others, so that the setup overlaps them. The answer must not depend on timing (xdist's
        workers must order their items alike). Default: none."""
        return False

    def first_run_builds(self, devices: Collection[str], ops: Collection[str] | None) -> str | None:
        """What this backend's items on ``devices`` of ``ops`` (None: every op) build on a first run in
        this environment and later runs find cached (said at the run's start, so a slow first run is not
        a surprise), or None: nothing, or already built. Default: nothing."""
        return None

    def warmed(self) -> None:
        """Wait for the setup :meth:`warm_up` started, if it is still under way: called before an item of
        this backend starts its timer, so that a build is never charged to an item's timeout. Default:
        nothing to wait for."""

    def __repr__(self) -> str:
        return f"<Backend {self.name}: {sorted(self.runners)}>"


@contextmanager
def torch_kernels_missing_are_unsupported(device: str, what: str):
    """torch's dispatcher with no sparse kernel for the device (XLA: SparseXLA; on cpu that would be
    a torch regression, so it stays an error there), or a sparse kernel with no implementation for
    the dtype (float16 sparse adds on cpu): Unsupported, with torch's reason (``what``: what ran into it)."""
    try:
        yield
    except (NotImplementedError, RuntimeError) as exc:  # a dtype kernel missing: RuntimeError before torch 2.6
        missing = missing_kernel(exc, device) if isinstance(exc, NotImplementedError) else None
        if missing is not None:
            raise Unsupported(f"{what} on {device}: {missing}") from exc
        untyped = missing_dtype_kernel(exc)
        if untyped is not None:
            raise Unsupported(f"{what}: stock torch has no kernel for this dtype: {untyped}") from exc
        raise
