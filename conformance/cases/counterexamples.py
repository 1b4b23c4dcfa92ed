"""Shrunk counterexamples of generated properties, written as a ready-to-commit spec and as a
standalone script.

The spec (same schema as ``specs/*.yaml``, loadable by :func:`conformance.specs.load.load_spec`) takes
its golden values from the op's NumPy float64 reference -- never from the code under test -- and
says so in its source and derivation. The script rebuilds the inputs with plain torch, runs the
implementation under test (the candidate's import target, or stock torch for the ``coo``
backend; other backends through the suite) and exits 1 while it still disagrees.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from conformance.backends.base import Backend
from conformance.cases.generated import (
    DivergenceObserved,
    Property,
    Trial,
    cases_of,
    safe_name,
    tolerances,
    widest,
)
from conformance.ops import OPS, Op
from conformance.ops.masked_mean import MaskedMeanInputs
from conformance.ops.optimizer_steps import OptimizerInputs
from conformance.tensors import CooArray

# ---------------------------------------------------------------- encoding to spec notation


def encode_array(array) -> Any:
    """Spec notation for an array: nested lists, or ``{fill, shape}`` for an empty multi-dim one."""
    array = np.asarray(array)
    if array.size == 0 and array.ndim > 1:
        fill = False if array.dtype == bool else 0.0
        return {"fill": fill, "shape": list(array.shape)}
    if array.dtype == bool:
        return array.tolist()
    if np.issubdtype(array.dtype, np.integer):
        return array.astype(np.int64).tolist()
    return array.astype(np.float64).tolist()


def encode_coo(coo: CooArray) -> dict:
    return {"indices": coo.indices.astype(np.int64).tolist(), "values": encode_array(coo.values),
            "size": [int(s) for s in coo.size]}


def encode_inputs(op: Op, inputs: Any) -> dict:
    if op.name == "coalesce":
        return {"tensor": encode_coo(inputs)}
    if isinstance(inputs, OptimizerInputs):
        hyper = {}
        for key, value in inputs.hyperparameters.items():
            hyper[key] = [float(v) for v in value] if isinstance(value, (tuple, list)) else (
                bool(value) if isinstance(value, (bool, np.bool_)) else float(value))
        raw = {"param": encode_array(inputs.param),
               "grads": [encode_coo(g) if isinstance(g, CooArray) else {"dense": encode_array(g)}
                         for g in inputs.grads]}
        if hyper:
            raw["hyperparameters"] = hyper
        return raw
    if isinstance(inputs, MaskedMeanInputs):
        return {"values": encode_array(inputs.values), "mask": encode_array(inputs.mask)}
    raise TypeError(f"cannot encode inputs of type {type(inputs).__name__}")


def encode_expected(op: Op, outputs: dict) -> dict:
    """Golden values in spec notation; outputs that are empty multi-dim arrays are left out for ops
    whose decoder only reads nested lists (they carry no information)."""
    expected: dict[str, Any] = {}
    for name in op.expected_schema.get("properties", {}):
        if name not in outputs:
            continue
        value = np.asarray(outputs[name])
        if value.ndim == 0:
            expected[name] = int(value) if name in op.exact_outputs else float(value)
        elif value.size == 0 and value.ndim > 1 and op.name != "coalesce":
            continue
        elif name == "size":
            expected[name] = [int(v) for v in value.tolist()]
        else:
            expected[name] = encode_array(value)
    return expected


class _FlowListDumper(yaml.SafeDumper):
    pass


def _flat(value) -> bool:
    """Scalars and (nested) lists of scalars: written inline, as the hand-written specs do."""
    if isinstance(value, list):
        return all(_flat(item) for item in value)
    return not isinstance(value, dict)


def _represent_list(dumper, data):
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=_flat(data))


def _represent_dict(dumper, data):
    inline = all(_flat(value) for value in data.values()) and len(repr(data)) < 160
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=inline)


_FlowListDumper.add_representer(list, _represent_list)
_FlowListDumper.add_representer(dict, _represent_dict)


def to_yaml(data: dict) -> str:
    return yaml.dump(data, Dumper=_FlowListDumper, sort_keys=False, width=110, allow_unicode=True)


# ---------------------------------------------------------------- the spec


@dataclass
class Counterexample:
    spec_path: Path
    script_path: Path
    spec_text: str
    reproduced: list[str] = field(default_factory=list)  # "case: outcome" lines from run_item
    problems: list[str] = field(default_factory=list)


def _source_of(op: Op) -> dict:
    module = inspect.getmodule(type(op))
    path = Path(inspect.getfile(module)) if module else None
    document = f"conformance/ops/{path.name}" if path else f"conformance.ops.{op.name}"
    return {"document": document,
            "title": f"NumPy float64 reference of {op.name} (conformance.ops.{op.name}: {op.name}.reference), "
                     "independent of the code under test",
            "section": "golden values of generated counterexamples"}


def _divergences_elsewhere(prop: Property, example: Any, dtype: str, failing: Backend,
                           others: dict[str, Backend]) -> tuple[list[dict], list[str]]:
    """Known divergences the other built-in backends show on this example, and ones that fail too."""
    entries: dict[str, dict] = {}
    also_failing = []
    for name, backend in others.items():
        if name in (failing.name, "reference") or not backend.runs_on("cpu"):
            continue
        try:
            prop.check(Trial(OPS[prop.op], backend, "cpu", dtype), example)
        except DivergenceObserved as hit:
            entry = entries.setdefault(hit.divergence.key, {
                "backends": [], "dtypes": [dtype], "reason": hit.divergence.reason,
                **({"link": hit.divergence.link} if hit.divergence.link else {})})
            entry["backends"].append(name)
        except Exception as exc:  # noqa: BLE001 - a note for the reader, not a verdict
            if type(exc).__name__ != "Unsupported":
                also_failing.append(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return list(entries.values()), also_failing


def build_spec(prop: Property, backend: Backend, device: str, dtype: str, example: Any, failure: BaseException,
               *, seed: int, replay: str, others: dict[str, Backend] | None = None,
               impl_target: str | None = None) -> tuple[dict, str]:
    """(spec document, short hash naming it) for a shrunk failing example."""
    op = OPS[prop.op]
    cases = cases_of(prop, example, dtype)
    digest = hashlib.sha256(json.dumps([encode_inputs(op, inputs) for _, inputs in cases], sort_keys=True,
                                       default=str).encode()).hexdigest()[:10]
    divergences, also_failing = _divergences_elsewhere(prop, example, dtype, backend, others or {})
    first_line = (str(failure).strip().splitlines() or [type(failure).__name__])[0]
    document: dict[str, Any] = {
        "op": op.name,
        "title": f"generated counterexample: {prop.id} on {backend.name} ({device}, {dtype})",
        "description": (f"Shrunk by Hypothesis from the generated property {prop.id!r} ({prop.summary}). "
                        f"Backend {backend.name} ({impl_target or backend.description}) failed with: {first_line}"
                        + (f" Built-in backends failing on it too: {'; '.join(also_failing)}." if also_failing else "")),
        "sources": {"numpy-reference": _source_of(op)},
        "cases": [],
    }
    for suffix, inputs in cases:
        case_id = safe_name(f"{prop.id}-{digest}" + (f"-{suffix}" if suffix else ""))
        case: dict[str, Any] = {
            "id": case_id,
            "source": "numpy-reference",
            "description": f"{prop.summary}; {backend.name} on {device}/{dtype}: {first_line}"[:400],
            "derivation": (f"golden values computed by the NumPy float64 reference ({op.name}.reference in "
                           f"conformance/ops/{op.name}.py) on these inputs, which are exact in {dtype}; not by the "
                           f"code under test. Found by the generated cases (seed {seed}); replay: {replay}"),
            "dtypes": [dtype],
            "inputs": encode_inputs(op, inputs),
        }
        try:
            reference = op.reference(inputs)
        except Exception as exc:  # the documented error
            case["expected_error"] = {"type": type(exc).__name__, "match": "^" + re.escape(str(exc)) + "$"}
        else:
            tolerance = widest(tolerances(op, inputs, dtype, reference))
            case["tolerance"] = {"rtol": float(f"{tolerance.rtol:.3g}"), "atol": float(f"{tolerance.atol:.3g}")}
            case["expected"] = encode_expected(op, reference)
            from conformance.specs.load import nonfinite_values

            if any(nonfinite_values(case["expected"], ())):  # e.g. masked_mean with no valid entry: NaN
                case["nonfinite"] = True
        if divergences:
            case["known_divergences"] = divergences
        document["cases"].append(case)
    return document, digest


def write_counterexample(directory: Path, prop: Property, backend: Backend, device: str, dtype: str, example: Any,
                         failure: BaseException, *, seed: int, replay: str, impl_target: str | None = None,
                         others: dict[str, Backend] | None = None) -> Counterexample:
    """Write ``<property>-<backend>-<device>-<dtype>-<hash>.yaml`` and ``.py``; load the spec back
    and run each case through the suite's runner on the failing backend."""
    from conformance.run.runner import run_item
    from conformance.specs.load import load_spec

    document, digest = build_spec(prop, backend, device, dtype, example, failure, seed=seed, replay=replay,
                                  others=others, impl_target=impl_target)
    directory.mkdir(parents=True, exist_ok=True)
    stem = safe_name(f"{prop.id}-{backend.name}-{device}-{dtype}-{digest}")
    spec_path = directory / f"{stem}.yaml"
    header = (f"# Generated counterexample ({prop.id}, backend {backend.name}, {device}, {dtype}).\n"
              f"# Golden values: the NumPy float64 reference, not the code under test.\n"
              f"# Replay the search: {replay}\n"
              f"# Reproduce with plain torch: python {stem}.py\n")
    text = header + to_yaml(document)
    spec_path.write_text(text, encoding="utf-8")
    script_path = directory / f"{stem}.py"
    script_path.write_text(render_script(prop, backend, dtype, document, impl_target=impl_target, replay=replay,
                                         spec_name=spec_path.name), encoding="utf-8")
    result = Counterexample(spec_path, script_path, text)
    try:
        spec = load_spec(spec_path)
    except Exception as exc:  # noqa: BLE001 - reported, so a writer bug cannot hide the counterexample
        result.problems.append(f"the written spec does not load: {exc}")
        return result
    for case in spec.cases:
        try:
            run_item(case, backend, device, dtype)
        except Exception as exc:  # noqa: BLE001
            line = (str(exc).strip().splitlines() or [""])[0]
            result.reproduced.append(f"{case.id}: fails ({type(exc).__name__}: {line})")
        else:
            result.reproduced.append(f"{case.id}: passes as a single case (the property needs the script)")
    result.problems += _other_backends_on(spec, others or {}, exclude=backend.name, dtype=dtype)
    return result


def _other_backends_on(spec, others: dict[str, Backend], exclude: str, dtype: str) -> list[str]:
    """Built-in backends the committed spec would flag (beyond its known divergences): worth
    knowing before committing it -- e.g. the runner's reference cross-check uses the dtype's
    default tolerance scaled by the op, not the case's tolerance."""
    from conformance.types import Unsupported
    from conformance.run.runner import run_item

    notes = []
    for name, other in others.items():
        if name in (exclude, "reference") or not other.runs_on("cpu") or not other.implements(spec.op.name):
            continue
        for case in spec.cases:
            if case.divergence_for(name, "cpu", dtype) is not None:
                continue
            try:
                run_item(case, other, "cpu", dtype)
            except Unsupported:
                continue
            except Exception as exc:  # noqa: BLE001 - a note for the reader
                line = (str(exc).strip().splitlines() or [""])[0]
                notes.append(f"committed as is, case {case.id} would also flag built-in backend {name}: "
                             f"{type(exc).__name__}: {line}")
    return notes


# ---------------------------------------------------------------- the script

_SCRIPT_HEAD = '''"""Counterexample: {prop_id} on backend {backend} ({dtype}).

{summary}.
Golden values: the NumPy float64 reference, not the code under test (see {spec_name}).
Replay the search: {replay}
Run: python {script_name}    (exit status 1 while the implementation still disagrees)
"""

import importlib
import importlib.util
import json
import sys
from pathlib import Path

import torch

ROOT = Path({root!r})
DTYPE = torch.{dtype}
TOL = dict(rtol={rtol!r}, atol={atol!r})
CASES = json.loads(r"""{cases_json}""")


def tensor(node, dtype=torch.float64):
    """Spec notation -> tensor: nested lists, or {{fill, shape}}."""
    if isinstance(node, dict):
        return torch.full(node["shape"], node["fill"], dtype=dtype)
    return torch.tensor(node, dtype=dtype)


def load(target):
    """Import module:attr or path/to/file.py:attr (relative to ROOT), as --conformance-impl does."""
    module_name, _, attr = target.partition(":")
    if module_name.endswith(".py"):
        path = Path(module_name) if Path(module_name).is_absolute() else ROOT / module_name
        spec = importlib.util.spec_from_file_location("candidate_under_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        sys.path.insert(0, str(ROOT))
        module = importlib.import_module(module_name)
    for part in attr.split("."):
        module = getattr(module, part)
    return module


def close(name, actual, expected):
    actual = torch.as_tensor(actual).detach().double()
    expected = tensor(expected) if not isinstance(expected, torch.Tensor) else expected.double()
    torch.testing.assert_close(actual, expected.reshape(actual.shape) if expected.numel() == actual.numel()
                               else expected, equal_nan=True, msg=lambda m: f"{{name}}: {{m}}", **TOL)


def bits_equal(name, a, b, where=None):
    a, b = torch.as_tensor(a).detach().double(), torch.as_tensor(b).detach().double()
    same = (a.view(torch.int64) == b.view(torch.int64)) | (a.isnan() & b.isnan())
    if where is not None:
        same = same | ~where
    assert bool(same.all()), f"{{name}} changed bit-for-bit at {{(~same).nonzero().tolist()[:5]}}: {{a}} vs {{b}}"

'''

_IMPL = {
    ("coo", "coalesce"): "impl = lambda tensor: tensor.coalesce()  # stock torch",
    ("coo", "adagrad"): "impl = torch.optim.Adagrad  # stock torch",
    ("coo", "sparse_adam"): "impl = torch.optim.SparseAdam  # stock torch",
    ("coo", "masked_mean"): '''def impl(values, mask):  # the coo backend: stock torch sparse sum
    indices = mask.nonzero().T
    valid = torch.sparse_coo_tensor(indices, values[tuple(indices)], values.shape)
    return torch.sparse.sum(valid) / valid._nnz()''',
}

_RUN_PLAIN = {
    "coalesce": '''
def run(inputs):
    coo = inputs["tensor"]
    indices = tensor(coo["indices"], torch.int64)
    values = tensor(coo["values"]).to(DTYPE)
    out = impl(torch.sparse_coo_tensor(indices, values, coo["size"]))
    return {"indices": out._indices(), "values": out._values(), "nnz": out._nnz(),
            "size": list(out.shape), "is_coalesced": out.is_coalesced(), "tensor": out}
''',
    "adagrad": '''
STATE = {"state_sum": "sum", "step": "step"}


def grad_of(node):
    if "dense" in node:
        return tensor(node["dense"]).to(DTYPE)
    return torch.sparse_coo_tensor(tensor(node["indices"], torch.int64), tensor(node["values"]).to(DTYPE),
                                   node["size"])


def run(inputs):
    param = tensor(inputs["param"]).to(DTYPE)
    hyper = dict(inputs.get("hyperparameters", {}))
    if "betas" in hyper:
        hyper["betas"] = tuple(hyper["betas"])
    optimizer = impl([param], **hyper)
    for node in inputs["grads"]:
        param.grad = grad_of(node)
        optimizer.step()
    state = optimizer.state[param]
    out = {"param": param.detach()}
    out.update({name: state[key] for name, key in STATE.items()})
    last = inputs["grads"][-1] if inputs["grads"] else None
    if OP == "adagrad" and last is not None:
        eps = hyper.get("eps", 1e-10)
        if "dense" in last:
            out["std"] = out["state_sum"].flatten().sqrt() + eps
        else:
            index = grad_of(last).coalesce()._indices()
            out["std"] = out["state_sum"][tuple(index)].sqrt() + eps
    return out


def specified(node, shape):
    mask = torch.zeros(shape, dtype=torch.bool)
    if "dense" in node:
        return ~mask
    index = torch.sparse_coo_tensor(tensor(node["indices"], torch.int64), tensor(node["values"]),
                                    node["size"]).coalesce()._indices()
    mask[tuple(index)] = True
    return mask
''',
    "masked_mean": '''
def run(inputs):
    values = tensor(inputs["values"]).to(DTYPE).requires_grad_(True)
    mask = tensor(inputs["mask"], torch.bool)
    result = impl(values, mask)
    result.reshape(()).backward()
    grad = values.grad if values.grad is not None else torch.zeros_like(values)
    return {"value": result.detach().reshape(()), "grad": grad, "mask": mask}
''',
}
_RUN_PLAIN["sparse_adam"] = _RUN_PLAIN["adagrad"].replace(
    'STATE = {"state_sum": "sum", "step": "step"}',
    'STATE = {"exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq", "step": "step"}')

_RUN_SUITE = '''
sys.path.insert(0, str(ROOT))
from conformance.backends import RunContext, builtin_backends  # noqa: E402
from conformance.ops import OPS  # noqa: E402

BACKEND = builtin_backends()[{backend!r}]


def run(inputs):
    decoded = OPS[OP].decode_inputs(inputs, DTYPE)
    return BACKEND.run(OP, decoded, RunContext("cpu", DTYPE))
'''

_CHECKS = {
    "coalesce-idempotent": '''
def extra(outputs, case):
    again = impl(outputs["tensor"])
    assert torch.equal(again._indices(), outputs["indices"]), "coalesce(coalesce(x)) changed the indices"
    bits_equal("values of coalesce(coalesce(x))", again._values(), outputs["values"])
''',
    "masked_mean-grad-zero-outside-mask": '''
def extra(outputs, case):
    grad = outputs["grad"]
    outside = ~outputs["mask"] & (grad != 0)
    assert not bool(outside.any()), f"grad is not zero outside the mask at {outside.nonzero().tolist()}: {grad}"
''',
    "masked_mean-ignores-masked-out": '''
SEEN = []


def extra(outputs, case):
    SEEN.append(outputs)
    if len(SEEN) == 2:
        for name in ("value", "grad"):
            bits_equal(f"{name} (other values under the mask)", SEEN[1][name], SEEN[0][name])
''',
    "adagrad-unspecified-unchanged": '''
def extra(outputs, case):
    inputs = case["inputs"]
    start = tensor(inputs["param"]).to(DTYPE)
    init = inputs.get("hyperparameters", {}).get("initial_accumulator_value", 0.0)
    previous = {"param": start, "state_sum": torch.full_like(start, init), "exp_avg": torch.zeros_like(start),
                "exp_avg_sq": torch.zeros_like(start)}
    for step in range(1, len(inputs["grads"]) + 1):
        now = run({**inputs, "grads": inputs["grads"][:step]})
        untouched = ~specified(inputs["grads"][step - 1], now["param"].shape)
        for name in NAMES:
            bits_equal(f"{name} through step {step} at unspecified entries", now[name], previous[name], untouched)
        previous = now
''',
}
_CHECKS["sparse_adam-unspecified-unchanged"] = _CHECKS["adagrad-unspecified-unchanged"]
_GROUPED = '''
import io

SEEN = []


def grouped(cases, resume_after=None):
    """One optimizer, a param group per case (the parameter without a gradient is left out); with
    resume_after, its state_dict goes through torch.save/torch.load into a fresh one after that step."""
    params = [tensor(c["inputs"]["param"]).to(DTYPE) for c in cases]
    groups = []
    for c, p in zip(cases, params):
        hyper = dict(c["inputs"].get("hyperparameters", {}))
        if "betas" in hyper:
            hyper["betas"] = tuple(hyper["betas"])
        groups.append({"params": [p], **hyper})
    optimizer = impl(groups)
    for step in range(1, len(cases[0]["inputs"]["grads"]) + 1):
        for c, p in zip(cases, params):
            p.grad = grad_of(c["inputs"]["grads"][step - 1])
        optimizer.step()
        if step == resume_after:
            buffer = io.BytesIO()
            torch.save(optimizer.state_dict(), buffer)
            buffer.seek(0)
            params = [p.detach().clone() for p in params]
            optimizer = impl([{**g, "params": [p]} for g, p in zip(groups, params)])
            optimizer.load_state_dict(torch.load(buffer, weights_only=False))
    return [{"param": p.detach(), **{n: optimizer.state[p][k] for n, k in STATE.items()}} for p in params]
'''
_CHECKS["adagrad-param-groups"] = _GROUPED + '''

def extra(outputs, case):
    SEEN.append((case, outputs))
    if len(SEEN) == len(CASES):
        together = grouped([c for c, _ in SEEN])
        for index, (got, (_, alone)) in enumerate(zip(together, SEEN)):
            for name in ("param", *STATE):
                bits_equal(f"{name} of parameter {index} (one optimizer over the groups vs its own)", got[name], alone[name])
'''
_CHECKS["adagrad-state-dict-resume"] = _GROUPED + '''

def extra(outputs, case):
    SEEN.append(case)
    if len(SEEN) == len(CASES):
        whole = grouped(SEEN)
        for k in range(1, len(SEEN[0]["inputs"]["grads"])):
            for index, (got, want) in enumerate(zip(grouped(SEEN, resume_after=k), whole)):
                for name in ("param", *STATE):
                    bits_equal(f"{name} of parameter {index}, state_dict reloaded after step {k}", got[name], want[name])
'''
_CHECKS["sparse_adam-param-groups"] = _CHECKS["adagrad-param-groups"]
_CHECKS["sparse_adam-state-dict-resume"] = _CHECKS["adagrad-state-dict-resume"]

_SCRIPT_TAIL = '''

def check(case):
    if "expected_error" in case:
        wanted = case["expected_error"]
        try:
            run(case["inputs"])
        except Exception as exc:  # noqa: BLE001
            import re
            assert any(c.__name__ == wanted["type"] for c in type(exc).__mro__), f"raised {{exc!r}}, expected {{wanted}}"
            assert re.search(wanted.get("match", ""), str(exc)), f"message {{str(exc)!r}} does not match {{wanted}}"
            return
        raise AssertionError(f"nothing was raised; expected {{wanted}}")
    outputs = run(case["inputs"])
    for name, want in case["expected"].items():
        if name not in outputs:
            raise AssertionError(f"{{name}} was not produced")
        if name in ("indices", "nnz", "size"):
            got = torch.as_tensor(outputs[name]).tolist()
            assert got == want, f"{{name}}: expected {{want}}, got {{got}}"
        else:
            close(name, outputs[name], want)
    if PROPERTY_CHECK:
        extra(outputs, case)


failures = 0
for case in CASES:
    try:
        check(case)
    except Exception as exc:  # noqa: BLE001 - a mismatch, or the implementation raising
        failures += 1
        print(f"FAIL {{case['id']}}: {{type(exc).__name__}}: {{exc}}")
    else:
        print(f"ok   {{case['id']}}")
sys.exit(1 if failures else 0)
'''


def render_script(prop: Property, backend: Backend, dtype: str, document: dict, *, impl_target: str | None,
                  replay: str, spec_name: str) -> str:
    op = prop.op
    first = next((c for c in document["cases"] if "tolerance" in c), {})
    tolerance = first.get("tolerance", {"rtol": 0.0, "atol": 0.0})
    cases = [{k: c[k] for k in ("id", "inputs", "expected", "expected_error") if k in c} for c in document["cases"]]
    head = _SCRIPT_HEAD.format(
        prop_id=prop.id, backend=backend.name, dtype=dtype, summary=prop.summary, spec_name=spec_name,
        replay=replay, script_name=spec_name.replace(".yaml", ".py"), root=str(Path.cwd()),
        rtol=tolerance["rtol"], atol=tolerance["atol"],
        cases_json=("[\n" + ",\n".join(json.dumps(case, allow_nan=True) for case in cases) + "\n]").replace(
            '"""', '\\"\\"\\"'))
    parts = [head, f"OP = {op!r}\n"]
    plain = impl_target is not None or (backend.name, op) in _IMPL
    if plain:
        parts.append(f"impl = load({impl_target!r})  # the candidate under test\n" if impl_target
                     else _IMPL[(backend.name, op)] + "\n")
        parts.append(_RUN_PLAIN[op])
        check = _CHECKS.get(prop.id)
    else:
        parts.append(_RUN_SUITE.format(backend=backend.name))
        check = None
    names = {"adagrad": ("param", "state_sum"), "sparse_adam": ("param", "exp_avg", "exp_avg_sq")}.get(op, ())
    parts.append(f"NAMES = {names!r}\nPROPERTY_CHECK = {bool(check)}\n")
    if check:
        parts.append(check)
    parts.append(_SCRIPT_TAIL.format())
    return "".join(parts)
