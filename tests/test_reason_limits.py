"""A drain reason kept whole by Slurm: within slurmdbd's 255 bytes (its node event's reason is a TINYTEXT column)
as well as REASON_MAX characters, where ≥, × and → take 3 bytes each (cluster/repair/ledger.py); and nvidia-bug-report's
.gz redacted as a stream, its memory bounded (cluster/repair/rma/folder.py).  scontrol's quotes: on the real cluster,
tests/test_cluster_accounting.py."""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

from trainready.bundle.gather import Stage
from trainready.cluster.repair import ledger
from trainready.cluster.repair.rma import folder

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_a_reason_fits_slurmdbds_255_bytes():
    why = ["collective: all_reduce busbw 12.1 GB/s ≥ 40% × below the fleet's median → " + "≥×→ " * 60,
           "check matmul: FAIL"]
    text = ledger.reason_text(why, "run", "fabric")
    assert len(text) <= ledger.REASON_MAX
    assert len(text.encode()) <= 255, len(text.encode())  # slurmdbd: TINYTEXT
    assert ledger.REASON_BYTES == 255
    assert text.endswith("... (+1 more)") and text.startswith("trainready:run/fab ")
    plain = ledger.reason_text(["check matmul: FAIL: 3 of 4096 elements off"], "run", "hardware")
    assert "..." not in plain  # a short one is kept as it is


def _peak(tmp: Path, lines: int, head: str = "") -> tuple[int, str, Stage]:
    """(the peak of memory Python allocated while the folder took the report in, the report's text, the stage)."""
    body = head + "".join(f"nvidia-smi line {i}: GPU 0 temperature 41 C, power 71 W, clocks 1980 MHz\n"
                          for i in range(lines))
    src = tmp / f"report-{lines}.log.gz"
    with gzip.open(src, "wt", encoding="utf-8") as f:
        f.write(body)
    stage = Stage(tmp / f"stage-{lines}")
    stage.root.mkdir()
    tracemalloc.start()
    folder._tool_file(stage, "tools/nvidia-bug-report.log.gz", src, "the bug report")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, body, stage


def test_a_bug_reports_gz_is_redacted_as_a_stream(tmp_path: Path):
    """A report 8 times longer takes no more memory (line by line; a private key over several lines gathered and
    redacted whole); the token and the key are redacted."""
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabcdefghijklmnop\n-----END RSA PRIVATE KEY-----\n"
    small, _, _ = _peak(tmp_path, 5_000)
    big, body, stage = _peak(tmp_path, 40_000, f"token {SECRET}\n" + key)
    assert len(body) > 2_900_000 and big - small < 1_000_000, (small, big)
    text = gzip.decompress((stage.root / "tools" / "nvidia-bug-report.log.gz").read_bytes()).decode()
    assert SECRET not in text and "MIIEowIBAAKCAQEA7" not in text and "abcdefghijklmnop" not in text
    assert text.endswith(body[body.index("nvidia-smi line 0:"):]) and text.startswith("token ")
    item = next(i for i in stage.items if i.path == "tools/nvidia-bug-report.log.gz")
    assert item.note == "secrets redacted: differs from the tool's own file"
