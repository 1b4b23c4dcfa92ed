"""No module-level mutable state in ``conformance/`` beyond what is declared here with its reason (issue
42, item 5): tables are read-only (``MappingProxyType``, tuples), and a module that keeps state across
calls -- a process-wide cache, a registry filled at import, a loaded extension -- is listed below. A new
module-level list, dict or set, or a ``global`` statement, fails this test until it is made read-only
or declared."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "conformance"
MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "WeakValueDictionary",
                 "WeakKeyDictionary", "WeakSet"}

# module:name -> why it is module-level state
DECLARED = {
    # documents handed to a JSON Schema validator and written out with json.dumps (a mappingproxy is not JSON)
    "core/tensors.py:TENSOR": "a JSON Schema document (jsonschema, json.dumps)",
    "core/tensors.py:COO": "a JSON Schema document (jsonschema, json.dumps)",
    "ops/optimizers/inputs.py:GRADIENT_SCHEMA": "a JSON Schema document (jsonschema, json.dumps)",
    # process-wide state by nature
    "core/divergences.py:_REGISTERED": "the registry of known divergences, filled as the op records are imported",
    "core/devices.py:_unavailable_cache": "a device's availability, probed once per process",
    "kernels/_build.py:_LOADED": "the C++ extension, loaded once per process",
    "kernels/_build.py:_FAILURE": "why the C++ extension could not be loaded, once per process",
    "kernels/_build.py:last_load_seconds": "how long the load took (the benchmark's record)",
    "kernels/_memory.py:last_collapse_seconds": "how long the last huge-page collapse took (the benchmark's record)",
    "kernels/_slots.py:_TABLES": "the device tables the slot kernels keep between steps (a CUDA graph replays them)",
    "kernels/_slots.py:_ACCUMULATORS": "the accumulators the slot kernels keep between steps",
    "core/forks.py:_STATE": "whether this process is a forked copy of a run's (inherited by a child), its runs, the fds a copy closes",
    "run/isolation.py:_STRAY_THREADS": "the threads a hung item left running in this worker",
    "run/isolation.py:_SESSIONS": "the process groups this process started, ended at exit",
    "run/signals.py:_ACTIVE": "the run whose results a signal handler writes before the process ends",
}
ALWAYS = {"__all__", "pytest_plugins"}


def module_state() -> set[str]:
    """``module:name`` of every module-level mutable container and ``global`` name in the package."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) and node.value is not None else []
            value = getattr(node, "value", None)
            call = value.func if isinstance(value, ast.Call) else None
            mutable = isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) or \
                getattr(call, "id", getattr(call, "attr", None)) in MUTABLE_CALLS
            found |= {f"{module}:{t.id}" for t in targets if mutable and isinstance(t, ast.Name) and t.id not in ALWAYS}
        found |= {f"{module}:{name}" for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names}
    return found


def test_module_level_state_is_only_what_is_declared():
    found = module_state()
    assert not found - set(DECLARED), f"module-level mutable state not declared in this test: {sorted(found - set(DECLARED))}"
    assert not set(DECLARED) - found, f"declared here but gone from the package: {sorted(set(DECLARED) - found)}"


def test_a_new_table_is_found(tmp_path, monkeypatch):
    (tmp_path / "table.py").write_text("NAMES = {'a': 1}\nFROZEN = tuple([1])\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path)
    assert module_state() == {"table.py:NAMES"}
