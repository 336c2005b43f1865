"""A typo in an output path is caught before any work runs: one line, exit 2, no folder made, no
scratch folder left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli


def _own_tmp(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A private TMPDIR for the CLI: what it leaves there is its own (no other process writes it)."""
    t = tmp_path / "tmpdir"
    t.mkdir()
    return t, {"TMPDIR": str(t)}


@pytest.mark.parametrize(
    "args",
    [
        ["node", "--only", "versions"],
        ["comm", "--backend", "gloo", "--world-size", "2", "-b", "1K", "-e", "1K"],
        ["resume", "--cpu", "--ranks", "1", "--steps", "4", "--checkpoint-step", "2"],
        ["env", "-q"],
    ],
)
def test_json_into_a_missing_folder_is_refused_before_running(cli, tmp_path: Path, args: list[str]) -> None:
    target = tmp_path / "no-such-dir" / "out.json"
    scratch, env = _own_tmp(tmp_path)
    res = cli(*args, "--json", str(target), env=env)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0] and "no-such-dir" in lines[0], res.stderr
    assert "Traceback" not in res.stderr
    assert not target.parent.exists()  # no folder made from a typo
    assert res.stdout.strip() == ""  # nothing ran: no table, no sweep
    assert list(scratch.glob("trainready-*")) == []  # and no scratch folder left behind


def test_spec_init_out_into_a_missing_folder_is_refused(cli, tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "fleet.toml"
    res = cli("spec", "init", "-o", str(target))
    assert res.returncode == 2 and "--out" in res.stderr and "does not exist" in res.stderr, res.stderr
    assert not target.parent.exists()
    ok = cli("spec", "init", "-o", str(tmp_path / "fleet.toml"))  # the same into a real folder works
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "fleet.toml").read_text().strip()


def test_resume_bad_data_leaves_no_scratch_folder(cli, tmp_path: Path) -> None:
    bad = tmp_path / "tokens.bin"
    bad.write_bytes(b"\x00" * 7)  # not a whole number of tokens of any dtype
    scratch, env = _own_tmp(tmp_path)
    res = cli("resume", "--cpu", "--data", str(bad), env=env)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert list(scratch.glob("trainready-*")) == []


def test_plan_file_missing_names_a_plan_file(cli, tmp_path: Path) -> None:
    res = cli("plan", "--file", str(tmp_path / "nope.toml"))
    assert res.returncode == 2
    assert res.stderr.strip().endswith("nope.toml: file not found (expected a TOML plan file)"), res.stderr


def test_failed_run_with_nothing_to_inspect_leaves_no_scratch_folder(cli, tmp_path: Path) -> None:
    scratch, env = _own_tmp(tmp_path)
    res = cli("node", "--only", "versions", "--spec", "example:b200-reference", env=env)
    assert res.returncode == 1  # a failed check (this machine is not the B200 reference) ...
    assert list(scratch.glob("trainready-*")) == []  # ... whose scratch folder stayed empty: removed
    assert "kept for inspection" not in res.stdout + res.stderr


@pytest.mark.slow
def test_a_deep_tmpdir_still_launches_ranks(tmp_path: Path) -> None:
    """A TMPDIR deeper than sun_path allows for multiprocessing's socket (a Slurm job folder, a CI workspace)
    used to fail every rank launch with 'OSError: AF_UNIX path too long'; TMPDIR itself stays where it is."""
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    r = run_cli("node", "--only", "allreduce", env={"TMPDIR": str(deep)})
    assert r.returncode == 0 and "every rank holds 36" in " ".join(r.stdout.split()), r.stdout + r.stderr
    assert "AF_UNIX" not in r.stdout + r.stderr
    assert list(deep.iterdir()) == [], list(deep.iterdir())
