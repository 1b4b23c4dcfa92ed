"""PyTorch Geometric as a ``coalesce`` candidate: ``torch_geometric.utils.coalesce`` with the
tensor's indices as an edge index and its values as edge attributes (``reduce="sum"``).

    --conformance-impl coalesce=examples.candidates.pyg_coalesce:coalesce

An edge index has two rows (source, target). A tensor with k != 2 sparse dims is laid out as one:
its first k - 1 sparse dims flattened row-major into the source, the last one the target (k = 1:
source 0); its dense trailing dims are edge-attribute columns. PyG orders edges by
``source * num_nodes + target``, so ``num_nodes`` is the larger of the two sides, and the
result's indices are unflattened back. Only the layout is converted; PyG sorts and sums.
sparse_dim 0 (no index to coalesce by) raises Unsupported.
"""

from __future__ import annotations

import math

import torch
import torch_geometric
from torch_geometric.utils import coalesce as pyg_coalesce

from conformance import Unsupported


def coalesce(tensor: torch.Tensor) -> torch.Tensor:
    sparse_dim = tensor.sparse_dim()
    if sparse_dim == 0:
        raise Unsupported(f"torch_geometric {torch_geometric.__version__} coalesces edge indices: a tensor "
                          "without sparse dims has none")
    sizes = tuple(tensor.shape[:sparse_dim])
    indices = tensor._indices()
    sources, targets = math.prod(sizes[:-1]), sizes[-1]
    source = torch.zeros_like(indices[0])
    for dim, size in enumerate(sizes[:-1]):  # row-major flattening of the leading sparse dims
        source = source * size + indices[dim]
    edge_index = torch.stack([source, indices[-1]])
    edge_index, edge_attr = pyg_coalesce(edge_index, tensor._values(), num_nodes=max(sources, targets, 1),
                                         reduce="sum")
    unflattened = []
    rest = edge_index[0]
    for size in reversed(sizes[:-1]):
        unflattened.append(rest % size)
        rest = rest // size
    result_indices = torch.stack([*reversed(unflattened), edge_index[1]])
    return torch.sparse_coo_tensor(result_indices, edge_attr, tuple(tensor.shape), is_coalesced=True)
