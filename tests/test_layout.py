"""The package's layout by pipeline stage, kept so: every import points down the stages, there is no
import cycle, the package stands on few levels, and op names stay in the op records.

Definitions (docs/architecture.md repeats them):

- A module's *stage* is its rank in ``STAGES`` (bottom first). A module may import its own stage and
  the stages below it, never one above. Imports inside functions and ``if TYPE_CHECKING:`` count.
- The *import graph* has one node per module of ``conformance/`` and an edge for each
  ``import``/``from ... import`` of another one, module-level or inside a function. Finding the op
  records (``conformance.ops``' discovery with ``pkgutil``) and the backends (``builtin_backends``,
  entry points) is a registry lookup by name, not an edge.
- A module's *level* is 1 for a module that imports no other module of the package at module level,
  else 1 + the highest level among the modules it imports at module level: the longest chain of
  imports that importing it executes. Function-level imports are left out of levels (they run
  later, when the function is called), and so are ``if TYPE_CHECKING:`` imports (they never run),
  but neither is left out of the stages or the cycle check.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

from conformance.ops import OPS

PACKAGE = Path(__file__).resolve().parents[1] / "conformance"

STAGES = (  # bottom first: (stage, module prefixes relative to conformance/); one folder per stage
    ("shared", ("__init__", "core")),
    ("op records", ("ops",)),
    ("implementations", ("kernels", "backends")),
    ("loading", ("specs",)),
    ("judging", ("judging",)),
    ("generated cases", ("cases",)),
    ("results", ("results",)),
    ("running", ("run",)),
    ("entry points", ("entry_points", "__main__")),
)
MAX_LEVELS = 6


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(test: ast.AST) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """The statements that run on import: the module's body, into if/try blocks, not into defs."""
    nodes, stack = [], list(tree.body)
    while stack:
        node = stack.pop()
        nodes.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack += node.orelse  # ``if TYPE_CHECKING:`` imports never run
        elif isinstance(node, (ast.If, ast.Try)):
            stack += node.body + node.orelse + getattr(node, "finalbody", [])
            stack += [stmt for handler in getattr(node, "handlers", []) for stmt in handler.body]
    return nodes


def _imported(module: str, node: ast.AST) -> set[str]:
    if isinstance(node, ast.Import):
        return {_resolve(alias.name) for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}".rstrip(".")
    return {_resolve(f"{base}.{alias.name}") if f"{base}.{alias.name}" in MODULES else _resolve(base)
            for alias in node.names}


@lru_cache(maxsize=2)
def import_graph(module_level_only: bool) -> dict[str, frozenset[str]]:
    """Module -> the package's modules it imports (see the module docstring)."""
    graph = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = _module_level(tree) if module_level_only else ast.walk(tree)
        found = set().union(*(_imported(module, node) for node in nodes))
        graph[module] = frozenset(name for name in found if name and name != module and name.startswith("conformance"))
    return graph


def stage_of(module: str) -> int:
    relative = module.split(".")[1] if "." in module else "__init__"
    return next(rank for rank, (_, prefixes) in enumerate(STAGES) if relative in prefixes)


def levels() -> dict[str, int]:
    graph = import_graph(module_level_only=True)

    @lru_cache(maxsize=None)
    def level(module: str) -> int:
        return 1 + max((level(other) for other in graph[module]), default=0)

    return {module: level(module) for module in graph}


def longest_chain() -> list[str]:
    graph, level_of = import_graph(module_level_only=True), levels()
    chain = [max(level_of, key=level_of.get)]
    while graph[chain[-1]]:
        chain.append(max(graph[chain[-1]], key=level_of.get))
    return chain


def cycles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    graph, index, low, stack, on_stack, found = import_graph(module_level_only=False), {}, {}, [], set(), []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in graph[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_every_module_has_a_stage():
    for module in MODULES:
        stage_of(module)


def test_no_module_imports_a_later_stage():
    upward = {module: sorted(other for other in imported if stage_of(other) > stage_of(module))
              for module, imported in import_graph(module_level_only=False).items()}
    upward = {module: others for module, others in upward.items() if others}
    assert not upward, f"imports running up the stages ({[name for name, _ in STAGES]}): {upward}"


def test_nothing_outside_run_imports_run():
    outside = {module: sorted(other for other in imported if other.startswith("conformance.run."))
               for module, imported in import_graph(module_level_only=False).items()
               if not module.startswith("conformance.run.")}
    outside = {module: others for module, others in outside.items() if others}
    assert not outside, f"run/ is the plugin: only conformance.entry_points.plugin names it (as pytest_plugins): {outside}"


def test_no_import_cycle():
    assert not cycles()


def test_the_package_stands_on_few_levels():
    level_of = levels()
    assert max(level_of.values()) <= MAX_LEVELS, f"{max(level_of.values())} levels: {' -> '.join(longest_chain())}"


MAX_FLOORS = 8
DATA_FOLDERS = ("specs_data",)


def room_of(module: str) -> str:
    """A top-level module or folder of conformance/ (``__init__`` for the package itself)."""
    return module.split(".")[1] if "." in module else "__init__"


def floors() -> dict[str, int]:
    """Each room's floor: 1 + the highest floor among the rooms it imports (any import counts)."""
    graph = import_graph(module_level_only=False)
    rooms = {}
    for module, imported in graph.items():
        rooms.setdefault(room_of(module), set()).update(room_of(other) for other in imported)
    rooms.pop("__init__", None)  # the package's own __init__ re-exports Unsupported; not a room

    @lru_cache(maxsize=None)
    def floor(room: str) -> int:
        return 1 + max((floor(other) for other in rooms[room] - {room, "__init__"}), default=0)

    return {room: floor(room) for room in rooms}


def test_the_root_shows_the_stages():
    """One folder per stage, at most 10 entries besides __init__, __main__ and data folders, on at most
    8 floors when each top-level module or folder is one room (../shared/tools/floors.py's measure)."""
    entries = sorted(path.name for path in PACKAGE.iterdir()
                     if path.name not in ("__init__.py", "__main__.py", "__pycache__", *DATA_FOLDERS))
    assert len(entries) <= 10, entries
    assert all((PACKAGE / name).is_dir() for name in entries), f"loose modules at the root: {entries}"
    staged = {prefix for _, prefixes in STAGES for prefix in prefixes}
    assert set(entries) <= staged, f"root entries with no stage: {set(entries) - staged}"
    floor_of = floors()
    assert max(floor_of.values()) <= MAX_FLOORS, sorted(floor_of.items(), key=lambda item: -item[1])


def test_no_op_name_outside_the_op_records():
    literal = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, OPS)))
    found = Counter()
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.split("/")[0] in ("ops", "backends", "kernels", "specs"):
            continue
        count = len(literal.findall(path.read_text(encoding="utf-8")))
        if count:
            found[relative] = count
    assert not found, f"op names outside ops/, backends/, kernels/ and specs/ (module: count): {dict(found)}; " \
                      f"put them in the op record"


def _oracle_name_tests() -> dict[str, int]:
    """Modules that recognise the oracle by its name: ``"reference"`` compared with a backend name."""
    test = re.compile(r"""(name\s*[!=]=\s*["']reference["'])|(\(\s*[\w.]+\s*,\s*["']reference["']\s*\))|"""
                      r"""(\(\s*["']reference["']\s*,?\s*\))""")
    found = Counter()
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.split("/")[0] == "ops" or relative == "backends/reference.py":
            continue
        count = len(test.findall(path.read_text(encoding="utf-8")))
        if count:
            found[relative] = count
    return dict(found)


def test_the_oracle_is_not_recognised_by_its_name():
    assert not _oracle_name_tests()


def test_every_file_of_the_package_matches_a_selection_rule():
    """A pull request that touches any file of the suite selects what it can affect (or, for a file
    a rule maps to nothing, says so): conformance/results/paths.yaml and the op records' rules."""
    from conformance.results.selection import load_rules

    rules = load_rules()
    files = [path.relative_to(PACKAGE.parent).as_posix() for path in PACKAGE.rglob("*")
             if (path.is_file() or path.is_symlink()) and "__pycache__" not in path.parts]
    assert not [name for name in files if not any(rule.matches(name) for rule in rules)]


def test_the_spec_schema_lists_the_op_records():
    from conformance.specs.load import spec_schema

    assert spec_schema()["properties"]["op"]["enum"] == sorted(OPS)
