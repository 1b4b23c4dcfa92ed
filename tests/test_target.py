"""The candidate target, parsed once: ``OP=module:attr`` or ``OP=path/to/file.py:attr``."""

from __future__ import annotations

import pytest

from conformance.core.target import CandidateTarget, TargetError, parse_targets


@pytest.mark.parametrize("text, op, module, attribute", [
    ("adagrad=torch.optim:Adagrad", "adagrad", "torch.optim", "Adagrad"),
    (" sgd = my/opt.py : Outer.SGD ", "sgd", "my/opt.py", "Outer.SGD"),
    ("coalesce=C:/x/y.py:f", "coalesce", "C", "/x/y.py:f"),  # the first colon splits: as load_object reads it
])
def test_a_target_reads_its_three_parts(text, op, module, attribute):
    target = CandidateTarget.parse(text)
    assert (target.op, target.module, target.attribute) == (op, module, attribute)
    assert str(target) == f"{op}={module}:{attribute}" and CandidateTarget.parse(str(target)) == target


@pytest.mark.parametrize("text", ["adagrad", "adagrad=torch.optim", "=m:a", "adagrad=:a", "adagrad=m:", "", "m:a"])
def test_text_that_is_no_target_is_an_error_naming_it_and_the_form(text):
    with pytest.raises(TargetError, match="expected OP=module:attr or OP=path/to/file.py:attr") as raised:
        CandidateTarget.parse(text)
    assert repr(text) in str(raised.value)
    assert CandidateTarget.parse_or_none(text) is None


def test_parse_or_none_takes_anything_a_results_file_holds():
    assert CandidateTarget.parse_or_none(["adagrad=m:a"]) is None and CandidateTarget.parse_or_none(None) is None
    assert CandidateTarget.parse_or_none("adagrad=m:a") == CandidateTarget("adagrad", "m", "a")


def test_one_candidate_per_op():
    assert [t.op for t in parse_targets(["adagrad=m:a", "sgd=m:s"])] == ["adagrad", "sgd"]
    with pytest.raises(TargetError, match="op 'adagrad' given twice"):
        parse_targets(["adagrad=m:a", "adagrad=n:b"])


def test_a_relative_file_is_resolved_from_the_runs_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = CandidateTarget.parse("adagrad=cands/my.py:A")
    assert target.is_file and target.short_name == "my.py:A"
    moved = target.resolved_from("/elsewhere")
    assert moved.module == "/elsewhere/cands/my.py" and moved.attribute == "A" and moved.op == "adagrad"
    (tmp_path / "cands").mkdir()
    (tmp_path / "cands" / "my.py").write_text("A = 1\n")
    assert target.resolved_from("/elsewhere") == target  # found where the command runs: left as is
    module = CandidateTarget.parse("adagrad=pkg.mod:A")
    assert not module.is_file and module.resolved_from("/elsewhere") == module
