"""Contract checks before the run (issue 43, item 4): before any item runs, ``check`` verifies once
the candidate's kind against its op, an optimizer class's constructor against the call the op
makes, and the device; each problem is a usage error (exit 4) within seconds that names what is
wrong and what the op expects, not dozens of erroring items. The checks themselves
(conformance.entry_points.preflight) run here in this process; ``python -m conformance check`` on
each case in the slow tier."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conformance.entry_points import check, preflight
from conformance_runs import REPO

CANDIDATES = '''\
import torch


class NeedsScale(torch.optim.Optimizer):
    """An extra required argument the op never passes."""

    def __init__(self, params, scale, lr=0.01):
        super().__init__(params, dict(lr=lr))

    def step(self, closure=None):
        return None


class NeedsKeyword(torch.optim.Adagrad):
    def __init__(self, params, lr=0.01, *, table_rows):
        super().__init__(params, lr=lr)


class RequiresLr(torch.optim.Adagrad):
    """lr required: a hyperparameter, which the op passes."""

    def __init__(self, params, lr, eps=1e-10):
        super().__init__(params, lr=lr, eps=eps)


class KeywordOnlyParams(torch.optim.Adagrad):
    def __init__(self, *, params, lr=0.01):
        super().__init__(params, lr=lr)


class NoStep:
    def __init__(self, params, lr=0.01):
        pass


def coalesce(tensor):
    return tensor.coalesce()
'''


@pytest.fixture(scope="module")
def candidates(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("preflight") / "preflight_candidates.py"
    path.write_text(CANDIDATES, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def loaded(candidates):
    spec = importlib.util.spec_from_file_location("preflight_candidates", candidates)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _probe(capsys, devices: str, *targets: str) -> tuple[int, str, float]:
    """What check's probe child says and exits with, run here: (status, its stderr, seconds)."""
    started = time.monotonic()
    code = preflight.probe(devices, list(targets), ok="probe: ok", usage=check.USAGE)
    seconds = time.monotonic() - started
    captured = capsys.readouterr()
    assert (code == 0) == ("probe: ok" in captured.out)
    return code, captured.err, seconds


# ------------------------------------------------------------------ the candidate's kind

def test_an_optimizer_for_a_functional_op_is_named_with_what_the_op_expects(capsys):
    code, err, seconds = _probe(capsys, "cpu", "coalesce=torch.optim:Adagrad")
    assert code == check.USAGE and seconds < 10
    assert err.startswith("conformance check: 'coalesce=torch.optim:Adagrad': Adagrad is a torch.optim.Optimizer "
                          "subclass, an optimizer's candidate: coalesce is a functional op"), err
    assert "coalesce needs a callable taking and returning a sparse COO tensor" in err
    assert "optimizer ops: adagrad, sgd, sparse_adam" in err


@pytest.mark.parametrize("op", ["masked_mean", "masked_mean_compiles"])
def test_every_functional_op_refuses_an_optimizer_class(loaded, op):
    for obj in (torch.optim.SGD, loaded.NeedsScale):
        problem = preflight.kind_problem(op, obj)
        assert problem and f"{op} is a functional op" in problem
    assert preflight.kind_problem(op, loaded.coalesce) is None  # a function is what it takes


def test_a_function_or_a_class_without_step_for_an_optimizer_op_is_named(loaded, candidates, capsys):
    problem = preflight.kind_problem("adagrad", loaded.coalesce)
    assert problem.startswith("coalesce is a function, not a class: adagrad is an optimizer op, which constructs "
                              "its candidate as Cls(params, **hyperparameters) and calls step()"), problem
    assert "coalesce, masked_mean" in problem  # where a function fits
    assert preflight.kind_problem("sgd", loaded.NoStep) == (
        "NoStep is a class without a step() method: sgd is an optimizer op, which calls step() on the instance it "
        "constructs")
    assert preflight.kind_problem("adagrad", torch.optim.Adagrad) is None
    code, err, _ = _probe(capsys, "cpu", f"sparse_adam={candidates}:coalesce")
    assert code == check.USAGE and "sparse_adam needs a torch.optim.Optimizer subclass with " \
                                   "torch.optim.SparseAdam's constructor" in err


# ------------------------------------------------------------------ the constructor

def test_a_constructor_needing_an_extra_argument_names_it_and_what_the_op_passes(candidates, capsys):
    code, err, seconds = _probe(capsys, "cpu", f"adagrad={candidates}:NeedsScale")
    assert code == check.USAGE and seconds < 10
    assert ("NeedsScale's constructor (params, scale, lr=0.01) requires 'scale', which adagrad does not pass: "
            "adagrad calls NeedsScale(params, **hyperparameters) with keyword hyperparameters among lr, lr_decay, "
            "weight_decay, initial_accumulator_value, eps, maximize (torch.optim.Adagrad's constructor) and nothing "
            "else; give it a default or take it out of the constructor") in err, err


def test_constructors_the_op_can_call_pass_and_others_are_named(loaded):
    assert preflight.constructor_problem("adagrad", torch.optim.Adagrad) is None
    assert preflight.constructor_problem("sgd", torch.optim.SGD) is None
    assert preflight.constructor_problem("sparse_adam", torch.optim.SparseAdam) is None
    assert preflight.constructor_problem("adagrad", loaded.RequiresLr) is None  # lr is the op's to pass
    keyword = preflight.constructor_problem("adagrad", loaded.NeedsKeyword)
    assert "requires 'table_rows', which adagrad does not pass" in keyword
    sgd = preflight.constructor_problem("sgd", loaded.NeedsScale)
    assert "requires 'scale'" in sgd and "among lr, momentum, dampening, weight_decay, nesterov, maximize" in sgd
    assert "takes no positional argument for the parameters" in preflight.constructor_problem(
        "adagrad", loaded.KeywordOnlyParams)
    assert preflight.constructor_problem("coalesce", loaded.coalesce) is None  # not an optimizer op


def test_a_candidate_that_fits_passes_the_probe(candidates, capsys):
    code, err, _ = _probe(capsys, "cpu", "adagrad=torch.optim:Adagrad", f"coalesce={candidates}:coalesce")
    assert code == 0 and err == ""


# ------------------------------------------------------------------ the device

def test_cuda_without_cuda_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for devices in ("cuda", "cpu,cuda"):
        code, err, seconds = _probe(capsys, devices, "adagrad=torch.optim:Adagrad")
        assert code == check.USAGE and seconds < 10
        assert err.startswith("conformance check: --device cuda: CUDA is not available here "
                              "(torch.cuda.is_available() is False"), err
        assert "leave cuda out of --device (e.g. --device cpu)" in err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert preflight.device_problem("cuda") is None


def test_xla_without_torch_xla_is_a_usage_error_before_torch_is_needed(monkeypatch, tmp_path, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch_xla" else real(name, *a))
    problem = preflight.early_device_problem("cpu,xla")
    assert problem.startswith("--device xla: torch_xla is not installed here"), problem
    assert preflight.early_device_problem("cpu") is None
    assert preflight.device_problem("xla") == problem
    # check says so before it starts the probe's child or touches a file
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(check, "_probe", lambda *args, **kwargs: pytest.fail("probed for a device torch_xla lacks"))
    assert check.main(["adagrad=torch.optim:Adagrad", "--device", "xla"]) == check.USAGE
    assert capsys.readouterr().err == f"conformance check: usage error: {problem}\n"
    assert not (tmp_path / "reports").exists()


def test_an_unknown_device_is_named_with_the_known_ones():
    assert preflight.device_problem("cpu,gpu") == "--device cpu,gpu: unknown device(s) gpu; known: cpu, cuda, xla"
    assert preflight.device_problem("cpu") is None


# ------------------------------------------------------------------ check itself, across the process boundary

def _cuda_or_xla_present(devices: str) -> bool:
    return ("cuda" in devices and torch.cuda.is_available()) or (
        "xla" in devices and importlib.util.find_spec("torch_xla") is not None)


@pytest.mark.slow  # child processes: python -m conformance check, and its probe
@pytest.mark.parametrize("impl, device, says", [
    ("coalesce=torch.optim:Adagrad", "cpu", "Adagrad is a torch.optim.Optimizer subclass, an optimizer's candidate: "
                                            "coalesce is a functional op"),
    ("adagrad=preflight_candidates.py:NeedsScale", "cpu", "requires 'scale', which adagrad does not pass: adagrad "
                                                          "calls NeedsScale(params, **hyperparameters)"),
    ("adagrad=torch.optim:Adagrad", "cuda", "--device cuda: CUDA is not available here"),
    ("adagrad=torch.optim:Adagrad", "xla", "--device xla: torch_xla is not installed here"),
], ids=["optimizer-for-coalesce", "extra-constructor-argument", "cuda-without-cuda", "xla-without-torch_xla"])
def test_check_refuses_before_any_item_runs(tmp_path, candidates, impl, device, says):
    if _cuda_or_xla_present(device):
        pytest.skip(f"{device} is available here")
    (tmp_path / "preflight_candidates.py").write_text(candidates.read_text(encoding="utf-8"), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "conformance", "check", impl, "--device", device], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - started
    assert proc.returncode == check.USAGE, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert says in proc.stderr and proc.stderr.startswith("conformance check: usage error: "), proc.stderr
    assert "-m pytest" not in proc.stdout and "RESULT" not in proc.stdout + proc.stderr  # no run started
    assert not (tmp_path / "reports").exists()  # nothing written
    assert seconds < 60, f"{seconds:.1f} s: seconds, not a run"
