"""Imports stand at the top of their module unless a comment says why not (issue 42, item 5): an import
inside a function of ``conformance/`` has a comment on its own line(s), or on the line directly above
it or above the first import of the consecutive imports it belongs to (one comment for a block) --
an optional dependency, a cost paid on one path only, a level too many (tests/test_layout.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "conformance"
IMPORTS = (ast.Import, ast.ImportFrom)
# a line that may start a function-level import with no comment on it: a module without one has nothing
# to report, and is not parsed (parsing all of conformance/ takes about a second)
MAYBE_UNEXPLAINED = re.compile(r"(^[ \t]+|:[ \t]*)(?:import|from)[ \t][^#\n]*$", re.MULTILINE)


def uncommented_imports(source: str) -> list[int]:
    """The lines of the function-level imports in ``source`` that no comment explains."""
    lines = source.splitlines()

    def explained(node: ast.stmt, head: ast.stmt) -> bool:
        own = lines[node.lineno - 1:node.end_lineno]  # an import holds no string: a "#" starts a comment
        return any("#" in line for line in own) or any(
            line > 1 and lines[line - 2].lstrip().startswith("#") for line in (node.lineno, head.lineno))

    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        in_function = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for value in vars(node).values():
            if isinstance(value, list) and in_function:
                head = None
                for stmt in value:
                    head = (head or stmt) if isinstance(stmt, IMPORTS) else None
                    if head is not None and not explained(stmt, head):
                        found.append(stmt.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, in_function)

    visit(ast.parse(source), False)
    return found


def test_every_function_level_import_says_why_it_is_not_at_the_top():
    sources = {path: path.read_text(encoding="utf-8") for path in sorted(PACKAGE.rglob("*.py"))}
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path, source in sources.items()
             if MAYBE_UNEXPLAINED.search(source) for line in uncommented_imports(source)]
    assert not found, f"imports inside functions with no comment saying why (hoist them, or say why): {found}"


def test_the_check_finds_a_planted_uncommented_import():
    source = '''import os


def f():
    # lazy: a cost paid on one path only
    import json
    import re

    import sys

    x = 1
    import csv
    import abc  # optional dependency
    import ast

    def g():
        import io
        return io


def h(): import glob
'''
    assert uncommented_imports(source) == [12, 14, 17, 21]
    assert all(MAYBE_UNEXPLAINED.search(line) for line in ("    import csv", "def h(): import glob"))
