"""Outputs written safely (issue 30, point 2): every command that writes a file -- ``report -o``,
``merge -o``, ``gate --markdown``, ``check --report``/``--markdown`` -- refuses a device, a folder or
a file it did not write (the rule the plugin applies to ``--conformance-results``), with the path
named and the command's documented exit status, and writes through a temporary file in the same
folder and a rename (a summary: appended in place)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from conformance.entry_points.cli import main
from conformance.results.store import load_results, lock_path, output_problem, previous_path, take_lock, write_output
from test_results_files import document, good, record, write

FULL = Path("/dev/full")  # a device: writing to it fails; replacing it would destroy it (as root)


def _shards(tmp_path: Path) -> list[str]:
    return [str(write(tmp_path, f"s{k}.json", document([record(f"c{k}")], id=f"r{k}",
                                                         options={"conformance_shard": f"{k}/2"})))
            for k in (1, 2)]


def _err(capsys) -> str:
    captured = capsys.readouterr()
    return captured.out + captured.err


@pytest.mark.parametrize("kind", ["results", "report", "append"])
def test_a_device_or_a_folder_is_never_an_output(tmp_path, kind):
    if FULL.exists():
        assert "not a regular file" in output_problem(FULL, kind)
    assert "is a directory" in output_problem(tmp_path, kind)
    (tmp_path / "f").write_text("x")
    assert "is a file, not a folder" in output_problem(tmp_path / "f" / "out", kind)
    assert output_problem(tmp_path / "new" / "out", kind) is None


def test_a_file_the_suite_did_not_write_is_not_replaced(tmp_path):
    setup = tmp_path / "setup.py"
    setup.write_text("from setuptools import setup\n")
    assert "not a results file of this suite" in output_problem(setup, "results")
    assert "not an HTML report of this suite" in output_problem(setup, "report")
    assert output_problem(setup, "append") is None  # a summary is appended to, never replaces
    empty = tmp_path / "empty"
    empty.touch()
    assert output_problem(empty, "results") is None and output_problem(empty, "report") is None


def test_report_refuses_a_device_a_foreign_file_and_writes_atomically(tmp_path, capsys):
    results = str(good(tmp_path))
    if FULL.exists():
        assert main(["report", results, "-o", str(FULL)]) == 2
        err = _err(capsys)
        assert f"cannot write {FULL}: is not a regular file" in err, err
        assert FULL.is_char_device()
    mine = tmp_path / "notes.html"
    mine.write_text("<p>my notes</p>")
    assert main(["report", results, "-o", str(mine)]) == 2
    assert f"cannot write {mine}: exists and is not an HTML report of this suite" in _err(capsys)
    assert mine.read_text() == "<p>my notes</p>"
    out = tmp_path / "index.html"
    assert main(["report", results, "-o", str(out)]) == 0
    inode = out.stat().st_ino
    assert main(["report", results, "-o", str(out)]) == 0, _err(capsys)  # its own report: replaced
    assert out.stat().st_ino != inode  # a new file renamed over it, not the old one rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.json", "index.html", "notes.html"]


def test_merge_refuses_a_device_and_a_file_that_is_not_a_results_file(tmp_path, capsys):
    shards = _shards(tmp_path)
    setup = tmp_path / "setup.py"
    setup.write_text("print('mine')\n")
    assert main(["merge", *shards, "-o", str(setup)]) == 2
    err = _err(capsys)
    assert f"-o {setup}: exists and is not a results file of this suite" in err, err
    assert setup.read_text() == "print('mine')\n"
    if FULL.exists():
        assert main(["merge", *shards, "-o", str(FULL)]) == 2
        assert f"-o {FULL}: is not a regular file" in _err(capsys)
        assert FULL.is_char_device()
    assert main(["merge", *shards, "-o", str(tmp_path)]) == 2
    assert "is a directory" in _err(capsys)
    merged = tmp_path / "merged.json"
    assert main(["merge", *shards, "-o", str(merged)]) == 0
    assert main(["merge", *shards, "-o", str(merged)]) == 0, _err(capsys)  # a results file: replaced
    assert len(load_results(merged).records) == 2
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_merge_keeps_the_complete_run_it_replaces_and_never_writes_a_file_a_run_holds(tmp_path, capsys):
    """The plugin's two rules for the file it writes hold for ``merge -o`` (round five, F5): it replaced a
    complete run's file with no backup, and wrote a file a running run held (which later overwrote it)."""
    shards = _shards(tmp_path)
    reports = tmp_path / "reports"
    reports.mkdir()
    out = good(reports, "results.json", id="a-complete-run")
    junit = reports / "results.junit.xml"
    junit.write_text("<testsuites/>")
    lock = take_lock(out)  # a run writing the file
    try:
        assert main(["merge", *shards, "-o", str(out)]) == 2
    finally:
        lock.release()
    assert f"-o {out}: another run is writing this results file (it holds the lock {lock_path(out)})" in _err(capsys)
    assert load_results(out).run["id"] == "a-complete-run" and junit.exists()
    assert not (reports / ".previous").exists()  # refused before anything was touched
    assert main(["merge", *shards, "-o", str(out)]) == 0, _err(capsys)
    assert load_results(previous_path(out)).run["id"] == "a-complete-run"
    assert previous_path(junit).read_text() == "<testsuites/>" and not junit.exists()
    assert len(load_results(out).records) == 2


def test_gate_markdown_refuses_a_device_or_folder_and_appends_to_a_regular_file(tmp_path, capsys):
    results = str(good(tmp_path))
    for bad in ([FULL] if FULL.exists() else []) + [tmp_path]:
        assert main(["gate", "--baseline", results, "--candidate", results, "--markdown", str(bad)]) == 2
        err = _err(capsys)
        assert f"cannot write --markdown {bad}: " in err and "RESULT" not in err, err
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    summary.chmod(0o640)
    assert main(["gate", "--baseline", results, "--candidate", results, "--markdown", str(summary)]) == 0
    text = summary.read_text()
    assert text.startswith("# earlier step\n### Conformance gate") and "RESULT: PASS" in text
    assert (summary.stat().st_mode & 0o777) == 0o640


def test_write_output_append_keeps_bytes_that_are_not_utf8(tmp_path):
    path = tmp_path / "summary"
    path.write_bytes(b"\xff\xfe old\n")
    write_output(path, "new\n", "append")
    assert path.read_bytes() == b"\xff\xfe old\nnew\n"


def test_a_summary_is_appended_in_place_through_a_link_and_beside_an_open_descriptor(tmp_path, capsys):
    """``{ ...; gate --markdown s.md; echo after; } >> s.md`` keeps every line, and a link stays a link
    whose target gets the summary (round five, F10: the summary was written as a new file renamed
    over the path, so the shell's descriptor wrote into the replaced file and the link became a file)."""
    results = str(good(tmp_path))
    target = tmp_path / "target.md"
    target.write_text("# step summary\n")
    link = tmp_path / "link.md"
    link.symlink_to(target.name)
    with open(link, "a") as shell:
        shell.write("before the gate\n")
        shell.flush()
        assert main(["gate", "--baseline", results, "--candidate", results, "--skip-timing",
                     "--markdown", str(link)]) == 0, _err(capsys)
        shell.write("after the gate\n")
    assert link.is_symlink()
    text = target.read_text()
    assert text.startswith("# step summary\nbefore the gate\n### Conformance gate"), text
    assert "RESULT: PASS" in text and text.endswith("```\nafter the gate\n"), text


def test_concurrent_appends_keep_every_summary(tmp_path):
    summary = tmp_path / "summary.md"
    threads = [threading.Thread(target=lambda: [write_output(summary, "a summary\n", "append") for _ in range(25)])
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert summary.read_text() == "a summary\n" * 200


@pytest.mark.parametrize("option", ["--report", "--markdown"])
def test_check_refuses_an_unusable_output_before_running_anything(tmp_path, capsys, monkeypatch, option):
    """A usage error (4), before the candidate is imported or anything is moved aside."""
    monkeypatch.chdir(tmp_path)
    import conformance.entry_points.check as check

    monkeypatch.setattr(check, "_probe", lambda *args, **kwargs: pytest.fail("probed before the outputs were checked"))
    (tmp_path / "reports").mkdir()
    target = tmp_path / "reports" / ("check.html" if option == "--report" else "folder")
    if option == "--report":
        target.write_text("<p>someone else's page</p>")
    else:
        target.mkdir()
    assert main(["check", "adagrad=torch.optim:Adagrad", option, str(target)]) == 4
    err = _err(capsys)
    assert f"usage error: {option} {target}: " in err, err
    assert not (tmp_path / "reports" / ".previous").exists()


def test_a_report_of_an_older_version_is_still_replaced(tmp_path, capsys):
    """Reports written before the generator line existed are recognised by their first lines and
    navigation, so upgrading the suite does not make reports/index.html unwritable."""
    from conformance.results.store import REPORT_MARK

    results, out = str(good(tmp_path)), tmp_path / "index.html"
    assert main(["report", results, "-o", str(out)]) == 0
    # the page as versions before the generator line wrote it: no mark, the navigation without the summary
    older = out.read_text(encoding="utf-8").replace(REPORT_MARK + "\n", "").replace(
        '<a href="#summary">Summary</a> · ', "")
    out.write_text(older, encoding="utf-8")
    assert REPORT_MARK not in out.read_text(encoding="utf-8")
    assert main(["report", results, "-o", str(out)]) == 0, _err(capsys)
    assert REPORT_MARK in out.read_text(encoding="utf-8")
