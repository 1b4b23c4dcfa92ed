"""What a backend is: a named set of op runners, each taking decoded inputs and a RunContext."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from conformance.types import RunContext, Unsupported


Runner = Callable[[Any, RunContext], dict[str, Any]]


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
    judged_against_torch: bool = False  # also compared with stock torch on every item (conformance.verdict)

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

    def __repr__(self) -> str:
        return f"<Backend {self.name}: {sorted(self.runners)}>"
