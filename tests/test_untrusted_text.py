"""Text from candidates, labels and results files is untrusted everywhere (issue 52, F1 and F8): a
lone surrogate (a byte that is not UTF-8, as Python holds it) never crashes a command or a run,
and control characters are shown as escapes (``\\x1b``) in what gate, merge, check and the report
show. One helper makes text safe: ``conformance/core/text.py``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from conformance.core.text import safe_to_show, valid_strings, valid_text
from conformance.entry_points import check, supervise
from conformance.entry_points.cli import main
from conformance.results.store import load_results
from conformance.results.writing import to_jsonable
from conformance_runs import REPO
from test_results_files import document, record, write

SURROGATE = "caf\udcff"  # os.listdir() of a Latin-1 folder: b"caf\xff" read as text
ANSI = ("\x1b[2J\x1b[H\x1b[32mRESULT: PASS (nothing regressed)\x1b[0m"
        "\x1b]8;;https://attacker.example\x07click\x1b]8;;\x07")  # F8's message: clears the screen, draws a pass
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _out(capsys) -> str:
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_safe_to_show_escapes_control_characters_and_lone_surrogates_only():
    assert valid_text("ok \u00e9 \U0001F600") == "ok \u00e9 \U0001F600"  # valid text is left as it is
    assert valid_text(SURROGATE) == "caf\\udcff" and valid_text("\ud800x") == "\\ud800x"
    assert safe_to_show("a\tb\nc\x1b[2J\x07\r\x00\x7f\x85\x9b\u00a0\u00e9 \udcff") == \
        "a\tb\nc\\x1b[2J\\x07\\x0d\\x00\\x7f\\x85\\x9b\u00a0\u00e9 \\udcff"
    assert valid_strings({SURROGATE: [SURROGATE, (1, SURROGATE)]}) == {"caf\\udcff": ["caf\\udcff", (1, "caf\\udcff")]}


def test_a_record_is_made_valid_text_where_it_is_made():
    made = to_jsonable({"message": f"cannot open /data/{SURROGATE}.bin", SURROGATE: [SURROGATE]})
    assert made == {"message": "cannot open /data/caf\\udcff.bin", "caf\\udcff": ["caf\\udcff"]}
    json.dumps(made, ensure_ascii=False).encode("utf-8")  # every encoder takes it (execnet, a file)


def test_a_runs_label_and_hostname_are_made_valid_text_and_any_text_is_written(tmp_path, monkeypatch):
    import socket

    from conformance.results.run_info import run_metadata
    from conformance.results.writing import atomic_write_text

    monkeypatch.setattr(socket, "gethostname", lambda: f"ci-{SURROGATE}")
    run = run_metadata(label=f"nightly {SURROGATE}")  # --conformance-label "$(printf 'nightly \xff')"
    assert (run["label"], run["hostname"]) == ("nightly caf\\udcff", "ci-caf\\udcff")
    atomic_write_text(tmp_path / "page.html", f"<h1>{SURROGATE}</h1>")  # was a UnicodeEncodeError
    assert (tmp_path / "page.html").read_text(encoding="utf-8") == "<h1>caf\\udcff</h1>"


def test_a_workers_report_and_warnings_are_made_valid_text_before_xdist_sends_them():
    """execnet refuses a lone surrogate: the worker died and the run was COULD NOT JUDGE (F1)."""
    import warnings

    from conformance.run.transfer import WorkerText

    data = {"longrepr": f"E ValueError: cannot open /data/{SURROGATE}.bin",
            "user_properties": [("conformance", {"message": SURROGATE})]}
    hook = WorkerText().pytest_report_to_serializable(SimpleNamespace(), report=None)
    next(hook)
    with pytest.raises(StopIteration) as done:
        hook.send(data)
    assert done.value.value == {"longrepr": "E ValueError: cannot open /data/caf\\udcff.bin",
                                "user_properties": [("conformance", {"message": "caf\\udcff"})]}
    for message in (UserWarning(f"cannot open {SURROGATE}"), UserWarning("ok", SURROGATE)):
        recorded = warnings.WarningMessage(message, UserWarning, f"/data/{SURROGATE}/cand.py", 3)
        WorkerText().pytest_warning_recorded(recorded, "call", "x", None)
        assert recorded.message == valid_text(str(message)) and recorded.filename == "/data/caf\\udcff/cand.py"
    fine = warnings.WarningMessage(UserWarning("fine"), UserWarning, "cand.py", 3)
    WorkerText().pytest_warning_recorded(fine, "call", "x", None)
    assert isinstance(fine.message, UserWarning)  # left as it was


def _hostile(tmp_path: Path) -> Path:
    """A results file whose label, hostname, a case and a message hold lone surrogates and control
    characters (the suite wrote such files before F1: JSON's ``\\udcff`` escape)."""
    records = [record("c0", message=f"{SURROGATE} {ANSI}"), record(f"c1-{SURROGATE}\x1b[1m", message="\x9b31m\x7f")]
    return write(tmp_path, "hostile.json", document(records, label=f"nightly {SURROGATE}\x1b]0;title\x07",
                                                    hostname=f"vm-{SURROGATE}\x1b[2J"))


def test_a_results_file_holding_lone_surrogates_loads_as_valid_text(tmp_path):
    loaded = load_results(_hostile(tmp_path))
    assert loaded.run["label"] == "nightly caf\\udcff\x1b]0;title\x07"  # control characters are kept in the data
    assert loaded.records[1]["case"] == "c1-caf\\udcff\x1b[1m"
    json.dumps([loaded.run, loaded.records], ensure_ascii=False).encode("utf-8")


def _gate_files(tmp_path: Path, **head_run) -> tuple[str, str]:
    base = write(tmp_path, "base.json", document([record("c0"), record("c1")]))
    head = write(tmp_path, "head.json", document([record("c0"), record("c1")], **head_run))
    return str(base), str(head)


def test_gate_prints_and_writes_markdown_for_a_hostname_holding_a_surrogate(tmp_path, capsys):
    """It printed a traceback and exited 1, the gate's "regression", with nothing on stdout (F1)."""
    base, head = _gate_files(tmp_path, hostname="ci-runner-\ud800")
    summary = tmp_path / "summary.md"
    assert main(["gate", "--baseline", base, "--candidate", head, "--markdown", str(summary)]) == 0
    out = _out(capsys)
    assert "RESULT: PASS" in out and "ci-runner-\\ud800" in out
    assert "ci-runner-\\ud800" in summary.read_text(encoding="utf-8")


@pytest.mark.slow
def test_check_fails_a_candidate_whose_message_holds_a_surrogate_and_escape_sequences(tmp_path):
    """Under xdist (one worker): was an INTERNALERROR from execnet and COULD NOT JUDGE (F1)."""
    from test_check_robustness import run_check

    proc, results = run_check(tmp_path, "SurrogateMessageAdagrad")
    output = proc.stdout + proc.stderr
    assert proc.returncode == check.FAIL, output[-3000:]
    assert "INTERNALERROR" not in output
    verdict = proc.stdout[proc.stdout.rindex("conformance check: adagrad="):]
    assert "RESULT: FAIL (1 error, 2 passed)" in verdict and not RAW_CONTROL.findall(verdict), verdict
    [error] = [r for r in json.loads(results.read_text(encoding="utf-8"))["records"] if r["outcome"] == "error"]
    assert "cannot open /data/caf\\udcff.bin \x1b[2J" in error["message"]
