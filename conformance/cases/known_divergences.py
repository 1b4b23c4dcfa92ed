"""Known rounding divergences of particular built-in backends.

The hand-written specs list known divergences per case; generated inputs need them modelled.
Those of one op live with it: a backend's documented idioms in ``Backend.known_divergences``
(the masked-mean idioms), stock torch's param-group behaviour in ``OptimizerOp.group_divergences``,
its half-precision arithmetic in the op's ``half_precision_model`` (:mod:`conformance.cases.lowprec`).
What is left here concerns every op a backend runs: how it rounds float16/bfloat16 results. A
generated example on which such a backend misses correct rounding but *matches its rounding
mode* is reported as that divergence (xfail, with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.rounding import TOWARD_ZERO
from conformance.types import Divergence

TRITON_INTERPRETER_BF16_TRUNCATION = Divergence(
    "triton-interpreter-bfloat16-truncation",
    "Triton's interpreter (TRITON_INTERPRET=1, the kernels' CPU path) converts float32 to bfloat16 by "
    "truncation, ignoring fp_downcast_rounding='rtne' (triton 3.9.0: 1.1298828125 -> 1.125, where "
    "round-to-nearest-even gives 1.1328125); compiled Triton on a GPU rounds to nearest even",
    None,
)


@dataclass(frozen=True)
class RoundingDivergence:
    """A backend that rounds ``dtypes`` in another ``mode`` than round-to-nearest-even on ``devices``."""

    divergence: Divergence
    backends: tuple[str, ...]
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    mode: str

    def applies_to(self, backend: str, device: str, dtype: str) -> bool:
        return backend in self.backends and device in self.devices and dtype in self.dtypes


ROUNDING_DIVERGENCES: tuple[RoundingDivergence, ...] = (
    RoundingDivergence(TRITON_INTERPRETER_BF16_TRUNCATION, ("kernel-triton",), ("cpu",), ("bfloat16",),
                       TOWARD_ZERO),
)


def rounding_for_backend(backend: str, device: str, dtype: str) -> RoundingDivergence | None:
    return next((entry for entry in ROUNDING_DIVERGENCES if entry.applies_to(backend, device, dtype)), None)
