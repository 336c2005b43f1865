"""`trainready resume` as users run it: bad data is one line + exit 2; a run prints
the component table and exits 0; a planted fault fails the check and exits 3 (a planted run)."""

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
    res = cli("resume", "--cpu", "--ranks", "100000")
    assert res.returncode == 2 and "--ranks 100000: expected at most" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
def test_run_prints_table_and_planted_lr_fault_fails(cli, tmp_path: Path) -> None:
    ok = cli("resume", "--cpu", "--steps", "20", "--checkpoint-step", "10", "--dir", str(tmp_path / "a"),
             "--json", str(tmp_path / "r.json"))
    assert ok.returncode == 0, ok.stderr
    assert "RNG state" in ok.stdout and "match" in ok.stdout and "PASS" in ok.stdout
    assert (tmp_path / "r.json").is_file()
    bad = cli("resume", "--cpu", "--steps", "20", "--checkpoint-step", "10", "--dir", str(tmp_path / "b"),
              "--plant", "resume.skip_lr=1")
    assert bad.returncode == 3  # planted: exit 3 whatever the verdict (records.PLANTED_EXIT)
    assert "DIFFERS" in bad.stdout and "LR scheduler was restored: no" in " ".join(bad.stdout.split())


@pytest.mark.parametrize("change, options, expected", [
    ({"batch_size": 0}, {}, "--batch-size (resume.batch_size) 0: expected >= 1"),
    ({"batch_size": -1}, {}, "--batch-size (resume.batch_size) -1: expected >= 1"),
    ({}, {"vocab_size": -5}, "--vocab-size -5: expected 0 (size it from the data) or 2.."),
    ({"atol": float("nan")}, {}, "--atol nan: expected a finite number >= 0"),
    ({"rtol": float("inf")}, {}, "--rtol inf: expected a finite number >= 0"),
    ({"rtol": -1e-3}, {}, "--rtol -0.001: expected a finite number >= 0"),
    ({"steps": 1, "checkpoint_step": 1}, {}, "--steps (resume.steps) 1: expected >= 2"),
    ({"steps": 20, "checkpoint_step": 20}, {}, "--checkpoint-step 20: expected 0 < checkpoint step < steps (20)"),
    ({"seed": -3}, {}, "resume.seed -3: expected >= 0"),
])
def test_bad_numbers_are_usage_errors_before_any_run(tmp_path: Path, change: dict, options: dict, expected: str) -> None:
    import dataclasses

    from trainready.errors import UsageError
    from trainready.resume.options import ResumeOptions
    from trainready.resume.setup import prepare
    from trainready.spec.model import ResumeSpec

    good = dataclasses.replace(ResumeSpec(), steps=20, checkpoint_step=10)
    prepare(good, ResumeOptions(cpu=True), {}, tmp_path / "ok")  # the base case is accepted
    with pytest.raises(UsageError) as info:
        prepare(dataclasses.replace(good, **change), ResumeOptions(cpu=True, **options), {}, tmp_path / "bad")
    assert expected in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "bad").exists()  # refused before anything was written


def test_bad_flag_values_exit_2_with_one_line(cli, tmp_path: Path) -> None:
    for args, expected in ((["--batch-size", "0"], "--batch-size (resume.batch_size) 0"),
                           (["--atol", "nan"], "--atol nan: expected a finite number >= 0"),
                           (["--vocab-size", "-5"], "--vocab-size -5")):
        res = cli("resume", "--cpu", "--dir", str(tmp_path / "ck"), *args)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.returncode == 2, res.stderr
        assert len(lines) == 1 and expected in lines[0] and "internal error" not in res.stderr


def test_dir_that_is_a_file_names_the_dir_flag(cli, tmp_path: Path) -> None:
    f = tmp_path / "a-file"
    f.write_text("x")
    res = cli("resume", "--cpu", "--dir", str(f))
    assert res.returncode == 2
    assert f"--dir {f}" in res.stderr and "--workdir" not in res.stderr
