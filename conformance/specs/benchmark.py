"""A spec's ``benchmark`` section: each entry expands into one :class:`Benchmark` per size x
density (the items that time them are :mod:`conformance.run.benchmark`'s).

A spec may carry::

    benchmark:
      - id: embedding-step
        description: an embedding table's Adagrad step, 1% of the rows touched, duplicates kept
        sizes: [[20000, 32]]       # the parameter / tensor shape; one benchmark per size x density
        densities: [0.01]          # fraction of the sparse-dim positions written (nnz = density * positions)
        steps: 2                   # optimizer steps per timed run (optimizers only)
        sparse_dims: 1             # leading dims that are sparse (default: 1 for optimizers, all for coalesce)
        dtypes: [float32]
        hyperparameters: {lr: 0.01}
        rounds: 7                  # timed rounds (pytest-benchmark pedantic mode, one iteration each)
        warmup: 1                  # untimed rounds first
        seed: 0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from conformance.core.record import BenchmarkInstance

DEFAULT_ROUNDS = 5
DEFAULT_WARMUP = 1


@dataclass(frozen=True)
class Benchmark:
    """One benchmark instance: a size and a density of one of a spec's benchmark entries."""

    id: str
    name: str
    line: int | None
    size: tuple[int, ...]
    density: float
    steps: int = 1
    sparse_dims: int | None = None
    dtypes: tuple[str, ...] = ("float32",)
    backends: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    hyperparameters: dict = field(default_factory=dict, hash=False, compare=False)
    rounds: int = DEFAULT_ROUNDS
    warmup: int = DEFAULT_WARMUP
    seed: int = 0
    description: str = ""

    def describe(self) -> BenchmarkInstance:
        return {"id": self.name, "size": list(self.size), "density": self.density, "steps": self.steps}


def _density_label(density: float) -> str:
    return f"{density:g}"


def expand(raw: dict, line: int | None) -> list[Benchmark]:
    """One Benchmark per size x density of a (schema-validated) benchmark entry."""
    sizes = [tuple(int(s) for s in size) for size in raw["sizes"]]
    densities = [float(d) for d in raw.get("densities", [1.0])]
    out = []
    for size in sizes:
        for density in densities:
            instance = f"benchmark-{raw['id']}-{'x'.join(map(str, size))}-d{_density_label(density)}"
            out.append(Benchmark(
                id=instance, name=raw["id"], line=line, size=size, density=density,
                steps=int(raw.get("steps", 1)), sparse_dims=raw.get("sparse_dims"),
                dtypes=tuple(raw.get("dtypes", ["float32"])),
                backends=tuple(raw["backends"]) if "backends" in raw else None,
                devices=tuple(raw["devices"]) if "devices" in raw else None,
                hyperparameters=dict(raw.get("hyperparameters", {})),
                rounds=int(raw.get("rounds", DEFAULT_ROUNDS)), warmup=int(raw.get("warmup", DEFAULT_WARMUP)),
                seed=int(raw.get("seed", 0)), description=raw.get("description", ""),
            ))
    return out
