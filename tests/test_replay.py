"""``python -m conformance replay ITEM``: the one re-run form the suite prints, from any directory.

The ids round-trip (what :func:`portable_id` prints, :func:`parse_item` reads back from anywhere);
a bad id names what is wrong; and the command run from an empty directory exits 1 on a failing
item, 0 on a passing one, 4 when there is no such item. (From a directory with the suite installed
from a wheel: tests/test_wheel.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.entry_points.check import specs_dir
from conformance.entry_points.replay import replay_args
from conformance.results.rerun import ReplayError, command, command_from_record, parse_item, portable_id
from conformance_runs import OWN_COALESCE_SPEC, wrong_adagrad_source

WRONG = "adagrad=my_adagrad.py:SquareBeforeSumAdagrad"


def test_item_ids_read_back_from_any_directory(tmp_path):
    specs = specs_dir()
    suite = portable_id(specs / "adagrad.yaml", "tutorial-step-2[coo-cpu-float32]", generated=False, cwd=tmp_path)
    assert suite == "specs/adagrad.yaml::tutorial-step-2[coo-cpu-float32]"
    item = parse_item(suite, cwd=tmp_path)
    assert (item.path, item.generated, item.case) == (specs / "adagrad.yaml", False, "tutorial-step-2")
    assert (item.backend, item.device, item.dtype) == ("coo", "cpu", "float32")

    generated = portable_id(specs, "adagrad-agrees-with-reference[kernel-triton-cpu-float16]", generated=True)
    assert generated == "specs::generated::adagrad-agrees-with-reference[kernel-triton-cpu-float16]"
    item = parse_item(generated, cwd=tmp_path)
    assert (item.path, item.generated, item.backend, item.device) == (specs, True, "kernel-triton", "cpu")

    # a spec file of your own: relative to where you stand, and never read as the suite's specs/
    (tmp_path / "specs").mkdir()
    own = tmp_path / "specs" / "adagrad.yaml"
    own.write_text("op: adagrad\n")
    mine = portable_id(own, "c[coo-cpu-float32]", generated=False, cwd=tmp_path)
    assert mine == "./specs/adagrad.yaml::c[coo-cpu-float32]"
    assert parse_item(mine, cwd=tmp_path).path == own
    elsewhere = portable_id(own, "c[coo-cpu-float32]", generated=False, cwd=tmp_path / "somewhere-else")
    assert elsewhere == f"{own.resolve()}::c[coo-cpu-float32]"  # not under where you stand: absolute
    assert parse_item(elsewhere, cwd=Path("/")).path == own.resolve()


@pytest.mark.parametrize("text, says", [
    ("tutorial-step-2[coo-cpu-float32]", "is not an item id: expected PATH::NAME"),
    ("specs/nope.yaml::c[coo-cpu-float32]", "no spec file specs/nope.yaml in the suite's specs"),
    ("specs/adagrad.yaml::c[float32]", "should read BACKEND-DEVICE-DTYPE"),
    ("specs::other::c[coo-cpu-float32]", "only the generated items have a second '::'"),
])
def test_a_bad_item_id_says_what_is_wrong(text, says, tmp_path):
    with pytest.raises(ReplayError) as raised:
        parse_item(text, cwd=tmp_path)
    assert says in str(raised.value)


def test_every_property_id_starts_with_its_ops_name_and_the_replay_finds_the_op_without_torch():
    from conformance.cases.properties import PROPERTIES
    from conformance.entry_points.replay import property_op

    for prop in PROPERTIES:  # what property_op reads an id by, held for every property there is
        assert prop.id.startswith(f"{prop.op}-"), prop.id
        item = parse_item(f"specs::generated::{prop.id}[coo-cpu-float32]")
        assert property_op(item) == prop.op, prop.id
    # an id that starts with no op's name is looked up among the properties, whose error names them
    with pytest.raises(ReplayError, match="no generated property 'nothing-here'; known: adagrad-"):
        property_op(parse_item("specs::generated::nothing-here[coo-cpu-float32]"))
    # the replay's own process: its pytest command and the saved example's folder, and no torch
    code = ("import sys; from conformance.entry_points.replay import replay_args, kept_examples; "
            "from conformance.results.rerun import parse_item; "
            "item = parse_item('specs::generated::masked_mean-sizes[dense-cpu-float32]'); "
            "args = replay_args(item); kept_examples(item, None, []); "
            "print(args[args.index('--conformance-op') + 1], 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["masked_mean", "False"], done.stdout + done.stderr


def test_the_command_carries_what_changes_the_item():
    assert command("specs/a.yaml::c[candidate-cpu-float32]", impl="adagrad=m.py:A") == \
        "python -m conformance replay 'specs/a.yaml::c[candidate-cpu-float32]' --impl adagrad=m.py:A"
    record = {"kind": "case", "generated": True, "case": "adagrad-agrees-with-reference", "op": "adagrad",
              "backend": "candidate", "device": "cpu", "dtype": "float16", "seed": 7, "profile": "thorough",
              "nodeid": "specs::generated::adagrad-agrees-with-reference[candidate-cpu-float16]"}
    run = {"options": {"conformance_impl": ["coalesce=x:y", "adagrad=my.py:A"], "conformance_no_shrink": True}}
    assert command_from_record(record, run) == (
        "python -m conformance replay 'specs::generated::adagrad-agrees-with-reference[candidate-cpu-float16]' "
        "--impl adagrad=my.py:A --seed 7 --profile thorough --no-shrink")
    assert command_from_record({**record, "rerun": "as recorded"}, run) == "as recorded"


def test_a_run_with_a_timeout_of_its_own_replays_under_it():
    """An item that timed out under ``--conformance-timeout 5`` (or ran 10 s: an error at 5, a pass at the
    default 60) replays under the same 5 s; the default, or pytest-timeout's own --timeout, is not repeated."""
    item = "specs/a.yaml::c[candidate-cpu-float32]"
    assert command(item, impl="adagrad=m.py:A", timeout=5.0).endswith("--impl adagrad=m.py:A --timeout 5")
    record = {"kind": "case", "spec": "specs/a.yaml", "case": "c", "op": "adagrad", "backend": "candidate",
              "device": "cpu", "dtype": "float32", "nodeid": item}
    options = {"conformance_impl": ["adagrad=m.py:A"]}
    assert command_from_record(record, {"options": {**options, "conformance_timeout": 2.5}}).endswith("--timeout 2.5")
    for other in ({"conformance_timeout": 60.0}, {"conformance_timeout": 5.0, "timeout": 30.0}, {}):
        assert "--timeout" not in command_from_record(record, {"options": {**options, **other}}), other
    args = replay_args(parse_item("specs/adagrad.yaml::tutorial-step-1[candidate-cpu-float32]"),
                       impls=["adagrad=m.py:A"], timeout=5.0)
    assert args[args.index("--conformance-timeout") + 1] == "5", args


def _replay(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance", "replay", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow  # child processes: the replay command itself
def test_replay_from_an_empty_directory_exits_with_the_items_verdict(tmp_path):
    (tmp_path / "my_adagrad.py").write_text(wrong_adagrad_source(), encoding="utf-8")
    failing = _replay(tmp_path, "specs/adagrad.yaml::duplicates-cancel[candidate-cpu-float32]", "--impl", WRONG)
    assert failing.returncode == 1, failing.stdout[-3000:] + failing.stderr[-2000:]
    assert "1 failed, " in failing.stdout and "duplicates-cancel" in failing.stdout
    # the failure names its own re-run command: this one, the file by its absolute path (it runs from anywhere)
    absolute = WRONG.replace("my_adagrad.py", str(tmp_path / "my_adagrad.py"))
    assert ("replay: python -m conformance replay 'specs/adagrad.yaml::duplicates-cancel[candidate-cpu-float32]' "
            f"--impl {absolute}") in failing.stdout, failing.stdout[-3000:]

    passing = _replay(tmp_path, "specs/adagrad.yaml::tutorial-step-1[candidate-cpu-float32]", "--impl", WRONG)
    assert passing.returncode == 0, passing.stdout[-3000:] + passing.stderr[-2000:]
    assert "1 passed, " in passing.stdout

    missing = _replay(tmp_path, "specs/adagrad.yaml::no-such-case[coo-cpu-float32]")
    assert missing.returncode == 4
    assert "no item specs/adagrad.yaml::no-such-case[coo-cpu-float32]" in missing.stdout + missing.stderr
    no_file = _replay(tmp_path, "specs/nope.yaml::c[coo-cpu-float32]")
    assert no_file.returncode == 4 and "no spec file specs/nope.yaml" in no_file.stderr
    needs_impl = _replay(tmp_path, "specs/adagrad.yaml::duplicates-cancel[candidate-cpu-float32]")
    assert needs_impl.returncode == 4 and "give it with --impl OP=module:attr" in needs_impl.stderr
    # a spec item writes nothing where it runs (no cache, no reports of its own)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_adagrad.py"]


def test_the_help_is_plain_text():
    from conformance.entry_points.cli import build_parser

    parser = build_parser()
    replay = parser._subparsers._group_actions[0].choices["replay"]  # argparse keeps subparsers there
    text = replay.format_help()
    assert "python -m conformance replay 'specs::generated::" in text
    assert "``" not in text and ":func:" not in text




@pytest.mark.slow  # child processes: the replay command itself
def test_replay_runs_an_item_of_a_spec_file_of_your_own(tmp_path):
    (tmp_path / "mine.yaml").write_text(OWN_COALESCE_SPEC, encoding="utf-8")
    passing = _replay(tmp_path, "./mine.yaml::one-duplicate[coo-cpu-float32]")
    assert passing.returncode == 0, passing.stdout[-3000:] + passing.stderr[-2000:]
    assert "1 passed" in passing.stdout
    missing = _replay(tmp_path, "./mine.yaml::no-such-case[coo-cpu-float32]")
    assert missing.returncode == 4, missing.stdout[-3000:] + missing.stderr[-2000:]


@pytest.mark.slow  # child processes: the replay command and its probe
def test_a_candidate_import_that_never_returns_is_a_usage_error_after_the_import_timeout(tmp_path):
    """Issue 52 (F2): replay waited for such an import for ever; now it is check's probe and bound."""
    from test_check_robustness import SLEEPY, _alive, env

    (tmp_path / "sleepy.py").write_text(SLEEPY)
    pid_file = tmp_path / "probe.pid"
    proc = subprocess.Popen([sys.executable, "-m", "conformance", "replay",
                             "specs/coalesce.yaml::basic-2x3[candidate-cpu-float32]", "--impl", "coalesce=sleepy.py:x",
                             "--import-timeout", "20"], cwd=tmp_path, env=env(PROBE_PID_FILE=str(pid_file)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        _end(proc)
    assert proc.returncode == 4, out[-2000:] + err[-2000:]
    assert "usage error: importing the candidate did not finish within 20 s" in err
    assert pid_file.exists() and not _alive(int(pid_file.read_text()))
    assert "-m pytest" not in out  # nothing run


@pytest.mark.slow  # child processes: the replay command, its probe and its pytest
def test_sigterm_to_replay_reaches_its_pytest_and_leaves_nothing_running(tmp_path):
    """Issue 52 (F2): SIGTERM ended replay and left its pytest running (PPID 1); now it is passed on."""
    from conformance_runs import REPO
    from test_check_robustness import FAULTS, _alive, env

    gate = tmp_path / "gate"
    proc = subprocess.Popen([sys.executable, "-m", "conformance", "replay",
                             "./tests/data/robustness_adagrad.yaml::misbehave-here[candidate-cpu-float64]",
                             "--impl", f"adagrad={FAULTS}:WaitingAdagrad"], cwd=REPO,
                            env=env(CONFORMANCE_TEST_GATE=str(gate)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    children: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while not gate.with_suffix(".waiting").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the candidate never got going"
            time.sleep(0.2)
        children = [int(pid) for pid in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
        time.sleep(1)
        left = [pid for pid in children if _alive(pid)]
    finally:
        _end(proc, *children)
    assert proc.returncode == 2, output[-3000:]  # pytest's "interrupted"
    assert "interrupted by SIGTERM" in output, output[-3000:]
    assert children and not left, "replay's pytest was left running"


def _end(proc: subprocess.Popen, *pids: int) -> None:
    """Whatever a failed test left running: ``proc``'s process group and ``pids``."""
    for kill, pid in [(os.killpg, proc.pid), *((os.kill, pid) for pid in pids)]:
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
