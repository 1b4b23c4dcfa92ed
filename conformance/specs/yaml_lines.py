"""YAML with line numbers: a spec file's node tree composed once (libyaml's parser where PyYAML
has it), checked before anything is built from it (aliases expanding beyond :data:`MAX_YAML_NODES`
nodes or containing themselves, a key given twice), and each JSON path's line, for errors that name
``file:line`` (:mod:`conformance.specs.load`)."""

from __future__ import annotations

from typing import Any

import yaml

# a spec's YAML may expand to at most this many nodes, aliases expanded (a billion-laughs
# document is rejected after this much work, before anything is built from it)
MAX_YAML_NODES = 1_000_000

# libyaml's parser where PyYAML has it (5-10x faster, the same nodes and marks), else PyYAML's own
COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def compose(loader_class, text: str) -> yaml.Node | None:
    """The document's node tree (None for an empty document), composed by ``loader_class``."""
    loader = loader_class(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


class YamlTooBig(Exception):
    """A document too big with its aliases expanded, or with an alias that contains itself: where and why."""

    def __init__(self, path: tuple, line: int, message: str):
        self.path, self.line, self.message = path, line, message


def _children(node: yaml.Node) -> list[tuple[Any, yaml.Node]]:
    if isinstance(node, yaml.MappingNode):
        return [(k.value if isinstance(k, yaml.ScalarNode) else str(k.start_mark), v) for k, v in node.value]
    if isinstance(node, yaml.SequenceNode):
        return list(enumerate(node.value))
    return []


def check_expansion(node: yaml.Node, limit: int = MAX_YAML_NODES) -> None:
    """Raise YamlTooBig when the document, aliases expanded, has more than ``limit`` nodes or
    an alias contains itself. Linear in the nodes as written (each shared node is sized once)."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, tuple, bool]] = [(node, (), False)]
    while stack:
        current, path, leaving = stack.pop()
        if leaving:
            on_path.discard(id(current))
            size[id(current)] = 1 + sum(size[id(child)] for _, child in _children(current))
            continue
        if id(current) in size:
            continue
        if id(current) in on_path:
            raise YamlTooBig(path, current.start_mark.line + 1,
                              "an alias refers to a node that contains it (a recursive structure)")
        on_path.add(id(current))
        stack.append((current, path, True))
        for key, child in reversed(_children(current)):
            stack.append((child, path + (key,), False))
    if size[id(node)] <= limit:
        return
    path = ()
    while True:  # the deepest field that alone expands beyond the limit
        bigger = [(key, child) for key, child in _children(node) if size[id(child)] > limit]
        if not bigger:
            break
        key, node = bigger[0]
        path += (key,)
    raise YamlTooBig(path, node.start_mark.line + 1,
                      f"expands to {size[id(node)]:,} YAML nodes with its aliases expanded, more than the "
                      f"{limit:,} a spec may have (an alias bomb?)")


def duplicate_key(root: yaml.Node) -> tuple[int, str] | None:
    """A key given twice in one mapping, as (its second line, a message naming both lines), or None
    (PyYAML keeps the last silently)."""
    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value != "<<":
                    key = (key_node.tag, key_node.value)
                    if key in first:
                        return (key_node.start_mark.line + 1,
                                f"duplicate key {key_node.value!r} (first given on line {first[key]})")
                    first[key] = key_node.start_mark.line + 1
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            stack.extend(child for pair in node.value for child in (pair if isinstance(pair, tuple) else (pair,)))
    return None


def line_map(node: yaml.Node) -> dict[tuple, int]:
    """Map each JSON path in the document to the 1-based line where its value starts
    (aliases expanded: call :func:`check_expansion` first)."""
    lines: dict[tuple, int] = {}
    stack: list[tuple[yaml.Node, tuple]] = [(node, ())]
    while stack:
        node, path = stack.pop()
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.start_mark)
                lines[path + (key,)] = key_node.start_mark.line + 1
        for key, child in reversed(_children(node)):
            stack.append((child, path + (key,)))
    return lines


def line_of(lines: dict[tuple, int], path) -> int | None:
    """The line of ``path``, or of the nearest field above it that has one."""
    path = tuple(path)
    while path not in lines and path:
        path = path[:-1]
    return lines.get(path)


def format_path(path) -> str:
    """A JSON path as a spec's author reads it: ``cases[2].inputs.grad``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"
