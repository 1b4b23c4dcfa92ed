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
from conformance.entry_points import check
from conformance.entry_points.cli import main
from conformance.results.store import load_results
from conformance.results.writing import to_jsonable
from conformance_runs import REPO, stub_checks_pytest
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


def test_report_writes_its_page_from_a_file_holding_surrogates_and_shows_control_characters_escaped(tmp_path, capsys):
    out = tmp_path / "index.html"
    assert main(["report", str(_hostile(tmp_path)), "-o", str(out)]) == 0, _out(capsys)  # was a UnicodeEncodeError
    page = out.read_text(encoding="utf-8")
    assert not RAW_CONTROL.findall(page)  # no ESC, BEL, DEL or C1 anywhere in the page, the data block included
    assert "<h1>nightly caf\\udcff\\x1b]0;title\\x07" in page and "vm-caf\\udcff\\x1b[2J" in page
    block = page.split('<script type="application/json" id="report-data">', 1)[1].split("</script>", 1)[0]
    messages = [item["message"] for item in json.loads(block)["items"]]
    assert messages == [f"caf\\udcff {ANSI}", "\x9b31m\x7f"]  # the data as recorded, for the page's script


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


def test_gate_shows_a_results_files_control_characters_escaped(tmp_path, capsys):
    """F8: the message cleared the screen and drew a green RESULT: PASS over a failing gate."""
    base, _ = _gate_files(tmp_path)
    head = write(tmp_path, "ansi.json", document([record("c0", outcome="failed", message=ANSI), record("c1")],
                                                 hostname="vm\x1b]0;owned-title\x07\x1b[2J"))
    summary = tmp_path / "summary.md"
    assert main(["gate", "--baseline", base, "--candidate", str(head), "--markdown", str(summary)]) == 1
    out, markdown = _out(capsys), summary.read_text(encoding="utf-8")
    for shown in (out, markdown):
        assert not RAW_CONTROL.findall(shown), shown
        assert "vm\\x1b]0;owned-title\\x07\\x1b[2J" in shown and "-- \\x1b[2J\\x1b[H\\x1b[32mRESULT: PASS" in shown
        assert shown.rstrip("`\n").endswith("RESULT: FAIL (1 regressed item(s))")


def test_gate_exits_2_not_1_on_anything_unforeseen(tmp_path, capsys, monkeypatch):
    """1 is the gate's regression: an error of its own is 2, one line, no traceback."""
    from conformance.results import gate as gate_module

    def broken(*args, **kwargs):
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(gate_module, "markdown", broken)
    base, head = _gate_files(tmp_path)
    assert main(["gate", "--baseline", base, "--candidate", head, "--markdown", str(tmp_path / "s.md")]) == 2
    assert "NOT COMPARABLE: UnicodeEncodeError" in _out(capsys)


def test_merge_prints_paths_holding_surrogates_and_control_characters_escaped(tmp_path, capsys):
    shards = [str(write(tmp_path, f"s{k}\x1b[2J{SURROGATE}.json", document(
        [record(f"c{k}")], id=f"r{k}", options={"conformance_shard": f"{k}/2"}))) for k in (1, 2)]
    merged = tmp_path / f"merged-{SURROGATE}\x1b]0;t\x07.json"
    assert main(["merge", *shards, "-o", str(merged)]) == 0  # printing the path was a UnicodeEncodeError
    out = _out(capsys)
    assert not RAW_CONTROL.findall(out) and "merged-caf\\udcff\\x1b]0;t\\x07.json (2 shards, 2 records" in out
    assert len(load_results(merged).records) == 2


def test_check_prints_and_writes_markdown_safely(tmp_path, monkeypatch, capsys):
    """pytest stubbed: a run whose candidate items were all skipped, with a reason holding escape
    sequences; the label (``--label``) holds a lone surrogate."""
    monkeypatch.chdir(tmp_path)
    stub_checks_pytest(monkeypatch, [record("c", op="adagrad", backend="candidate", outcome="skipped",
                                            message=f"{ANSI} {SURROGATE}",
                                            nodeid="specs/adagrad.yaml::c[candidate-cpu-float32]")])
    summary = tmp_path / "summary.md"
    assert main(["check", "adagrad=torch.optim:Adagrad", "--label", f"nightly {SURROGATE}\x1b[2J",
                 "--markdown", str(summary)]) == check.COULD_NOT_JUDGE
    out, markdown = _out(capsys), summary.read_text(encoding="utf-8")
    assert "--conformance-label 'nightly caf\\udcff\\x1b[2J'" in out
    for shown in (out, markdown):
        assert not RAW_CONTROL.findall(shown), shown
        assert "every one was skipped (\\x1b[2J\\x1b[H\\x1b[32mRESULT: PASS" in shown


def test_the_runs_unsupported_summary_shows_a_candidates_reason_escaped():
    from conformance.run.outcomes import PROPERTY
    from conformance.run.plugin import pytest_terminal_summary

    lines: list[str] = []
    unsupported = {"backend": "candidate", "outcome": "unsupported", "spec": "s.yaml", "case": "c",
                   "message": f"unsupported: {ANSI}"}
    reporter = SimpleNamespace(stats={"unsupported": [SimpleNamespace(user_properties=[(PROPERTY, unsupported)])]},
                               config=SimpleNamespace(rootpath=REPO), section=lambda *a, **k: None,
                               write_line=lambda line, **markup: lines.append(line))
    pytest_terminal_summary(reporter, 0, reporter.config)
    assert lines[-1] == f"UNSUPPORTED candidate: {safe_to_show(ANSI)} (1 item)"


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
