"""Memory layout as a dimension of an example: how a tensor an example hands to an implementation
is laid out in memory (contiguous, a strided view into a larger storage, transposed, channels_last),
and the record of where it was placed, so that a check can tell whether an implementation wrote
outside the view it was given.

A :class:`Layout` is data (an op's spec case may name one, Hypothesis draws them; ``ops/draw.py``);
:func:`place` materializes a contiguous tensor in it. Every layout holds the same values as the
contiguous tensor: an implementation that reads a view by its strides, as torch's documented
semantics do, gives bit for bit the result it gives on the contiguous copy.

The storage around a view is filled with a sentinel (a number no example draws); after the run,
:func:`outside_changed` says whether a byte of it changed (a kernel that walks ``data_ptr()``
linearly, or writes past a view, corrupts its neighbours).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

import torch
from hypothesis import strategies as st

CONTIGUOUS = "contiguous"
STRIDED = "strided"  # a view into a larger storage: an offset, every ``step``-th entry of the last dim
TRANSPOSED = "transposed"  # dims reversed in memory (``t()`` of a contiguous tensor, a permute for n-D)
CHANNELS_LAST = "channels_last"  # 4-D only: torch.channels_last
LAYOUT_KINDS = (CONTIGUOUS, STRIDED, TRANSPOSED, CHANNELS_LAST)  # the order Hypothesis shrinks toward

# what fills the storage around a view: an exact value in every float dtype that no strategy draws
FLOAT_SENTINEL = -7.75
INDEX_SENTINEL = 0  # a valid index: a kernel that reads it reads a wrong entry, not out of bounds
BOOL_SENTINEL = True
GUARD = 8  # sentinel entries after the view's window beyond its own length (place)


@dataclass(frozen=True)
class Layout:
    """How one tensor is laid out: ``kind`` (one of :data:`LAYOUT_KINDS`), and for ``strided`` the
    storage offset before the view and the step between its entries along the last dim."""

    kind: str = CONTIGUOUS
    offset: int = 0
    step: int = 1

    def __post_init__(self) -> None:
        if self.kind not in LAYOUT_KINDS:
            raise ValueError(f"layout {self.kind!r} is not one of {', '.join(LAYOUT_KINDS)}")
        if self.offset < 0 or self.step < 1:
            raise ValueError(f"layout {self.kind}: offset must be >= 0 and step >= 1, got {self.offset}, {self.step}")

    @property
    def is_contiguous(self) -> bool:
        return self.kind == CONTIGUOUS or (self.kind == STRIDED and self.offset == 0 and self.step == 1)

    def fits(self, ndim: int) -> bool:
        """Whether a tensor of ``ndim`` dims can take this layout (transposed: 2+ dims; channels_last: 4)."""
        return {TRANSPOSED: ndim >= 2, CHANNELS_LAST: ndim == 4}.get(self.kind, True)

    def __str__(self) -> str:
        if self.kind == STRIDED:
            return f"strided(offset={self.offset}, step={self.step})"
        return self.kind

    @classmethod
    def parse(cls, node: Any) -> "Layout":
        """A layout from spec notation: ``transposed``, or ``{strided: {offset: 1, step: 2}}``."""
        if isinstance(node, str):
            return cls(node)
        if isinstance(node, dict) and len(node) == 1:
            (kind, options), = node.items()
            return cls(kind, **(options or {}))
        raise ValueError(f"a layout is a name ({', '.join(LAYOUT_KINDS)}) or {{strided: {{offset, step}}}}, got {node!r}")

    def encode(self) -> Any:
        """Spec notation (:meth:`parse` of it gives this layout back)."""
        return {STRIDED: {"offset": self.offset, "step": self.step}} if self.kind == STRIDED else self.kind


def describe(layouts: dict[str, Layout]) -> str:
    """``param transposed, grad strided(offset=1, step=2)``: the non-contiguous layouts of an example."""
    shown = [f"{role} {layout}" for role, layout in layouts.items() if not layout.is_contiguous]
    return ", ".join(shown) or "every input contiguous"


@dataclass
class Placement:
    """One tensor placed in a layout: the whole ``storage`` it lives in (a 1-D tensor), its bytes as
    they were after placing (``before``), the ``view`` with the layout's strides, and what the
    implementation was handed (the view itself; in a linear-window run, the contiguous tensor over
    the same window of storage that a kernel walking ``data_ptr()`` linearly reads)."""

    role: str
    layout: Layout
    storage: torch.Tensor
    before: torch.Tensor
    view: torch.Tensor
    handed: torch.Tensor


def _sentinel(dtype: torch.dtype) -> Any:
    if dtype == torch.bool:
        return BOOL_SENTINEL
    return FLOAT_SENTINEL if (dtype.is_floating_point or dtype.is_complex) else INDEX_SENTINEL


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, running = [], 1
    for size in reversed(shape):
        strides.append(running)
        running *= max(size, 1)
    return tuple(reversed(strides))


def _geometry(shape: tuple[int, ...], layout: Layout) -> tuple[int, tuple[int, ...], int]:
    """(storage length, strides, storage offset) of a tensor of ``shape`` in ``layout``."""
    numel = math.prod(shape)
    if layout.kind == STRIDED:
        if not shape:
            return layout.offset + 1, (), layout.offset
        steps = [layout.step]
        for size in reversed(shape[1:]):
            steps.append(steps[-1] * max(size, 1))
        return layout.offset + numel * layout.step, tuple(reversed(steps)), layout.offset
    if layout.kind == TRANSPOSED:
        reversed_strides = contiguous_strides(tuple(reversed(shape)))
        return numel, tuple(reversed(reversed_strides)), 0
    if layout.kind == CHANNELS_LAST:
        n, c, h, w = shape
        return numel, (h * w * c, 1, w * c, c), 0
    return numel, contiguous_strides(shape), 0


def place(role: str, tensor: torch.Tensor, layout: Layout, *, linear_window: bool = False) -> Placement:
    """``tensor``'s values in ``layout``, in a storage of their own filled with a sentinel around the
    view. ``linear_window``: hand over the contiguous tensor over the view's window of storage
    instead of the view (what a kernel that walks ``data_ptr()`` linearly sees)."""
    if not layout.fits(tensor.dim()):
        raise ValueError(f"{role}: layout {layout} does not fit a {tensor.dim()}-D tensor")
    shape = tuple(tensor.shape)
    length, strides, offset = _geometry(shape, layout)
    # a guard after the view, as long as the offset and the view together and then some: a kernel that adds the
    # storage offset twice, or writes past the view's end, writes into it (a check sees it) and not past the storage
    storage = torch.full((2 * length + GUARD,), _sentinel(tensor.dtype), dtype=tensor.dtype, device=tensor.device)
    view = storage.as_strided(shape, strides, offset)
    view.copy_(tensor)
    handed = storage.as_strided(shape, contiguous_strides(shape), offset) if linear_window else view
    return Placement(role, layout, storage, storage.clone(), view, handed)


def outside_changed(placement: Placement) -> str | None:
    """Where the storage around ``placement``'s view changed since it was placed (its first changed
    entry and how many), or None when every byte outside the view is as it was."""
    positions = torch.arange(placement.storage.numel(), device=placement.storage.device)
    inside = torch.zeros_like(positions, dtype=torch.bool)
    view = placement.view
    if view.numel():
        inside[positions.as_strided(view.shape, view.stride(), view.storage_offset()).reshape(-1)] = True
    changed = _bits(placement.storage) != _bits(placement.before)
    if changed.dim() > 1:  # complex: real and imaginary parts
        changed = changed.any(-1)
    changed &= ~inside
    if not bool(changed.any()):
        return None
    first = int(changed.nonzero()[0, 0])
    return (f"{placement.role} ({placement.layout}): {int(changed.sum())} storage entries outside the view changed "
            f"(first at storage position {first}: {placement.before[first].item()!r} -> "
            f"{placement.storage[first].item()!r})")


_INTEGER_OF_WIDTH = MappingProxyType({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64})


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """A 1-D tensor's bytes as integers of its width, (n, 2) for complex (NaN compares equal to itself)."""
    tensor = tensor.detach()
    if tensor.dtype == torch.bool:
        return tensor.to(torch.uint8)
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    return tensor.contiguous().view(_INTEGER_OF_WIDTH[tensor.element_size()])


def torch_equal_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same bytes entry by entry (shape, dtype and every bit; NaN too)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if a.shape != b.shape or a.dtype != b.dtype or a.layout != b.layout:
        return False
    if a.layout != torch.strided:
        a, b = a.coalesce(), b.coalesce()
        return torch_equal_bits(a.indices(), b.indices()) and torch_equal_bits(a.values(), b.values())
    return bool(torch.equal(_bits(a.detach().cpu().reshape(-1)), _bits(b.detach().cpu().reshape(-1))))


def in_storage_order(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor's entries in the order its storage holds them (what a kernel walking ``data_ptr()``
    linearly sees): for a dense tensor whose strides are a permutation of contiguous ones, its
    storage window; else its entries in index order."""
    if tensor.layout != torch.strided or not tensor.numel():
        return tensor.reshape(-1) if tensor.layout == torch.strided else tensor
    strides = tensor.stride()
    order = sorted(range(tensor.dim()), key=lambda dim: -strides[dim])
    permuted = tensor.permute(order)
    if permuted.is_contiguous():
        return permuted.reshape(-1)
    return tensor.reshape(-1)


def _layout_of_kind(kind: str) -> st.SearchStrategy[Layout]:
    if kind == STRIDED:  # an offset into the storage, a step between entries; shrinks to offset 0, step 1
        return st.builds(Layout, st.just(STRIDED), st.integers(0, 3), st.integers(1, 3))
    return st.just(Layout(kind))


def layouts_strategy(roles: Mapping[str, tuple[str, ...]]) -> st.SearchStrategy[dict[str, Layout]]:
    """A layout for each role (role -> the layouts it may take, contiguous first): Hypothesis shrinks
    each toward contiguous, so a shrunk example keeps non-contiguous only the input that matters."""
    return st.fixed_dictionaries({role: st.sampled_from(kinds).flatmap(_layout_of_kind)
                                  for role, kinds in roles.items()})
