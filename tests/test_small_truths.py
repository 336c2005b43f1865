"""Small things a user reads: spec init's floor notes name no source file, every command's --spec help lists
every shipped example spec, and a bare `plan` names --preset."""

from __future__ import annotations

import re

import pytest
import typer

from evidence_records import run_main

from trainready.cli import app
from trainready.spec.floors import comm_floor
from trainready.spec.load import EXAMPLES


def test_a_floor_set_by_the_minimum_margin_says_so_without_a_source_file() -> None:
    f = comm_floor("all_reduce@8", [10.0, 10.1, 9.9, 10.0, 10.05], "gloo", 0.8)
    text = f.describe()
    assert not f.catches_slowdown and "set by the backend's minimum margin, 25%" in text  # the note is there ...
    assert not re.search(r"\w+/\w+\.py|\.py\b", text), text  # ... and names no file of the package


@pytest.mark.parametrize("path", [["node"], ["comm"], ["resume"], ["cluster", "run"], ["cluster", "resume"]])
def test_spec_help_lists_every_shipped_example(path: list[str]) -> None:
    cmd = typer.main.get_command(app)
    ctx = cmd.make_context("trainready", [*path, "--help"], resilient_parsing=True)
    for name in path:
        cmd = cmd.get_command(ctx, name)  # type: ignore[attr-defined]
        ctx = cmd.make_context(name, ["--help"], parent=ctx, resilient_parsing=True)
    squashed = re.sub(r"\s+", "", cmd.get_help(ctx))
    assert "--spec" in squashed
    missing = [n for n in EXAMPLES if f"example:{n}" not in squashed]
    assert missing == [], f"{' '.join(path)} --help does not list {missing}"


def test_a_bare_plan_names_preset() -> None:
    r = run_main("plan")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--preset NAME" in lines[0] and "--params N" in lines[0], r.stderr
