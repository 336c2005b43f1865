"""`trainready resume` as users run it: bad data is one line + exit 2; a run prints
the component table and exits 0; a planted fault exits 1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainready.data.corpus import write_sample_corpus


def test_truncated_idx_is_one_line_exit_2(cli, tmp_path: Path) -> None:
    prefix = write_sample_corpus(tmp_path)
    idx = Path(f"{prefix}.idx")
    good = cli("resume", "--data", str(prefix), "--cpu", "--steps", "0")  # bad flag value, data fine
    assert good.returncode == 2 and "checkpoint" in good.stderr and ".idx" not in good.stderr
    os.truncate(idx, idx.stat().st_size - 20)
    res = cli("resume", "--data", str(prefix), "--cpu", "--dir", str(tmp_path / "ck"))
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert str(idx) in lines[0] and "truncated .idx" in lines[0] and "expected" in lines[0]


def test_unknown_preset_and_bad_ranks_are_usage_errors(cli) -> None:
    res = cli("resume", "--cpu", "--preset", "huge")
    assert res.returncode == 2 and "unknown model preset 'huge'" in res.stderr
    res = cli("resume", "--cpu", "--ranks", "0")
    assert res.returncode == 2 and "--ranks 0" in res.stderr


@pytest.mark.slow
def test_run_prints_table_and_planted_lr_fault_exits_1(cli, tmp_path: Path) -> None:
    ok = cli("resume", "--cpu", "--steps", "20", "--checkpoint-step", "10", "--dir", str(tmp_path / "a"),
             "--json", str(tmp_path / "r.json"))
    assert ok.returncode == 0, ok.stderr
    assert "RNG state" in ok.stdout and "match" in ok.stdout and "PASS" in ok.stdout
    assert (tmp_path / "r.json").is_file()
    bad = cli("resume", "--cpu", "--steps", "20", "--checkpoint-step", "10", "--dir", str(tmp_path / "b"),
              "--plant", "resume.skip_lr=1")
    assert bad.returncode == 1
    assert "DIFFERS" in bad.stdout and "LR scheduler was restored: no" in " ".join(bad.stdout.split())
