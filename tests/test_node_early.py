"""Bad input costs nothing: `node` checks its command line, spec and every output path before importing
torch (the checks' registry imports it), and an unwritable output path is one line, exit 2, before any
check runs, with no scratch folder left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SRC, run_cli

# The CLI in a child process that says, whatever the exit, whether torch was imported.
PROBE = ("import sys\nfrom trainready.cli import main\ntry:\n    main(sys.argv[1:])\nfinally:\n"
         "    print('torch imported' if 'torch' in sys.modules else 'torch not imported')\n")


def _probe(*args: str) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_a_spec_typo_is_one_line_before_torch_is_imported(tmp_path: Path) -> None:
    typo = tmp_path / "typo.toml"
    typo.write_text("[gpu]\ncuont = 8\n")
    listed = _probe("node", "--list")  # the probe sees torch where the registry is loaded ...
    assert listed.returncode == 0 and listed.stdout.strip().endswith("torch imported"), listed.stdout + listed.stderr
    p = _probe("node", "--spec", str(typo))  # ... and none on the way to a spec error
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [f"trainready: error: {typo}: key 'gpu.cuont': unknown key (expected one "
                                             "of: count, driver_branch, memory_gib_min, model)"]
    assert p.stdout.strip() == "torch not imported"


@pytest.mark.parametrize("args, line", [
    (["--json", "/proc/trainready-n.json"], "--json /proc/trainready-n.json: cannot create a file in /proc"),
    (["--workdir", "/proc/trainready-w"], "--workdir /proc/trainready-w: cannot create"),
    (["--image-digest", "sha256:123"], "--image-digest"),
])
def test_other_command_line_errors_come_before_torch(args: list[str], line: str) -> None:
    p = _probe("node", *args)
    assert p.returncode == 2 and p.stdout.strip() == "torch not imported", p.stdout + p.stderr
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"trainready: error: {line}"), p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["node", "--only", "versions", "--json"], ["node", "--only", "versions", "--junit"],
    ["node", "--only", "versions", "--prometheus"], ["comm", "--world-size", "2", "-b", "1K", "-e", "1K", "--json"],
    ["resume", "--cpu", "--ranks", "1", "--steps", "4", "--checkpoint-step", "2", "--json"], ["env", "-q", "--json"],
    ["plan", "--params", "7B", "--json"], ["selftest", "--json"], ["spec", "init", "--out"],
])
def test_an_unwritable_output_is_refused_before_any_work(argv: list[str], tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = "/proc/trainready-out"  # its folder exists; nothing can be created in it (a pseudo filesystem)
    p = run_cli(*argv, out, env={"TMPDIR": str(tmp)})
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and f"{argv[-1]} {out}: cannot create a file in /proc" in err[0], p.stderr
    assert p.stdout.strip() == ""  # nothing ran: no table, no sweep, no manifest
    assert list(tmp.iterdir()) == []  # and no scratch folder left behind


def test_a_level_typo_lists_the_levels() -> None:
    p = run_cli("node", "--level", "slow")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == ["trainready: error: --level slow: expected one of light, quick, standard, burn-in "
                                             "(try 'trainready node --help')"]


def test_a_bundle_into_an_unwritable_place_is_one_line(tmp_path: Path) -> None:
    rec = tmp_path / "plan.json"
    assert run_cli("plan", "--params", "7B", "--gpus", "8", "--json", str(rec)).returncode == 0
    p = run_cli("bundle", "/proc/trainready-bundle.tar.gz", str(rec), "--no-env")
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == ["trainready: error: bundle /proc/trainready-bundle.tar.gz: cannot create "
                                             "a folder in /proc (No such file or directory)"]
