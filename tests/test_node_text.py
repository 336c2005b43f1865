"""Text a node wrote is data: cleaned once where it is read (util/nodetext.py), so no NUL byte reaches Slurm's
argv, no lone surrogate the UTF-8 Prometheus textfile, no ESC or BEL a drain reason or the operator's terminal;
and the Prometheus HELP line escapes only what the text format defines.  Without Slurm; the drain itself and a
node Slurm refuses are in tests/test_cluster_sweep.py."""

from __future__ import annotations

import json
from pathlib import Path

from trainready.cluster.repair import ledger
from trainready.cluster.tasks.layout import NODE_SCHEMA, read_json
from trainready.cluster.tasks.progress import read as read_progress
from trainready.report.prometheus import Sample, render
from trainready.util.nodetext import TEXT_MAX, clean, clean_tree

HOSTILE = "check matmul: FAIL \x00 \ud800 \x1b[2J \x07 \x9b tail"


def test_every_control_character_and_invalid_code_point_is_replaced_and_length_is_bounded() -> None:
    out = clean(HOSTILE)
    for bad in ("\x00", "\ud800", "\x1b", "\x07", "\x9b"):
        assert bad in HOSTILE and bad not in out
    assert out == "check matmul: FAIL \ufffd \ufffd \ufffd[2J \ufffd \ufffd tail"
    assert clean("a\tb\nc ünïcode ✓") == "a\tb\nc ünïcode ✓"  # TAB, LF and real characters stay
    long = clean("x" * (TEXT_MAX + 10))
    assert long.startswith("x" * TEXT_MAX) and long.endswith("... (10 more characters)")
    assert clean_tree({"k\x00": ["\ud800", 1, None, {"a": "\x07"}]}) == {"k\ufffd": ["\ufffd", 1, None, {"a": "\ufffd"}]}


def _hostile_record(tmp_path: Path) -> Path:
    """A node record as a broken or hostile node writes it: JSON's escapes carry NUL and a lone surrogate."""
    doc = {"schema": NODE_SCHEMA, "node": "n1", "report": {"results": [
        {"name": "matmul", "status": "fail", "message": HOSTILE}]}, "manifest": {"host\x1b": "h\x07"}}
    path = tmp_path / "n1.json"
    path.write_text(json.dumps(doc), encoding="utf-8")  # ensure_ascii: "\u0000", "\ud800" as escapes
    return path


def test_a_node_record_is_cleaned_where_it_is_read(tmp_path: Path) -> None:
    path = _hostile_record(tmp_path)
    raw = json.loads(path.read_text(encoding="utf-8"))  # what reading it plainly gives: the bytes as the node sent
    assert "\x00" in raw["report"]["results"][0]["message"] and "\ud800" in raw["report"]["results"][0]["message"]
    doc, why = read_json(path, NODE_SCHEMA)
    assert why == "" and doc is not None
    msg = doc["report"]["results"][0]["message"]
    assert msg == clean(HOSTILE) and msg.encode("utf-8")  # encodable: no lone surrogate left
    assert doc["manifest"] == {"host\ufffd": "h\ufffd"}
    from trainready.cluster.tasks import progress

    progress.path(tmp_path, "n1").parent.mkdir(parents=True)
    progress.path(tmp_path, "n1").write_text(json.dumps({"phase": "matmul\x00\x1b"}), encoding="utf-8")
    assert read_progress(tmp_path, "n1") == {"phase": "matmul\ufffd\ufffd"}


def test_a_drain_reason_holds_no_control_character_and_stays_within_slurms_bound() -> None:
    reason = ledger.dated_reason("sweep", [HOSTILE, "second"])
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF for c in reason), repr(reason)
    assert reason.startswith("trainready:sweep/sw ") and reason.endswith("(+1 more)")
    assert len(ledger.reason_text(["x\x1b" * 500])) <= ledger.REASON_MAX


def test_the_prometheus_textfile_is_utf8_whatever_a_label_holds_and_help_escapes_only_backslash_and_lf() -> None:
    text = render([Sample("trainready_x", 'a "quoted" help \\ line\nnext', (("reason", "r \ud800\x00\"q\"\n"),), 1.0)])
    text.encode("utf-8")  # a lone surrogate here raised UnicodeEncodeError in the atomic write
    help_line, _, sample = text.splitlines()
    assert help_line == '# HELP trainready_x a "quoted" help \\\\ line\\nnext'  # '"' as it is: no \" in HELP
    assert sample == 'trainready_x{reason="r \ufffd\ufffd\\"q\\"\\n"} 1.0'


def test_trainready_report_of_a_node_record_shows_its_text_cleaned(cli, tmp_path: Path) -> None:  # type: ignore
    """`trainready report` of a node's own report (its text went straight to the terminal and the HTML)."""
    doc = {"schema": "trainready.report/1", "command": "node", "host": "n1\x1b]0;title\x07", "status": "fail",
           "started_at": "2026-12-05T03:00:00+00:00", "duration_s": 1.0, "context": {},
           "results": [{"name": "matmul", "title": "matmul", "status": "fail", "message": HOSTILE, "duration_s": 1.0,
                        "metrics": [], "thresholds": []}]}
    src = tmp_path / "n1.json"
    src.write_text(json.dumps(doc), encoding="utf-8")
    p = cli("report", str(src), "--html", str(tmp_path / "r.html"))
    out = p.stdout + p.stderr + (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "matmul" in out and "tail" in out, out[-2000:]
    assert not {"\x00", "\x1b", "\x07", "\x9b"} & set(out), repr(out[-2000:])
