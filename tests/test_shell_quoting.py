"""No shell string is built from data: the command lines trainready hands a shell (the array task's batch script,
the scrontab entry, the sbcast wrapper) carry names holding $(), backticks, quotes, spaces and line feeds as data,
run by a real bash that prints the argv it was given.  The distribution's own run on Slurm with such names:
tests/test_image_distribute.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from trainready.cluster.options import FleetOptions
from trainready.cluster.steps import batch_script, task_command
from trainready.commands.cluster.sweep import scrontab_line
from trainready.errors import UsageError

NASTY = ("a $(touch {d}/P1) b", "`touch {d}/P2`", "q'uo\"te", "sp ace", "semi;colon&&amp|pipe", "new\nline")
# The program each line starts, replaced by a bash function that prints its arguments one per NUL.
ECHO = 'printf "%s\\0" "$@"'


def _argv_through_bash(script: str, program: str, tmp: Path) -> list[str]:
    """Run `script` in bash with `program` (and exec) printing their arguments; the argv it got."""
    p = subprocess.run(["bash", "-c", f'{program}() {{ {ECHO}; }}; exec() {{ "$@"; }}\n{script}'], capture_output=True,
                       text=True, cwd=tmp, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.split("\0")[:-1]


def test_the_batch_script_gives_the_node_task_its_argv_byte_for_byte(tmp_path: Path) -> None:
    nasty = [s.format(d=tmp_path) for s in NASTY]
    opts = FleetOptions(results=tmp_path / nasty[0], spec=nasty[1], only=(nasty[2],), skip=(nasty[4],),
                        plants={"cluster.fail": nasty[5]})
    want = task_command(opts)
    script = batch_script(opts).replace(want[0], "python_here", 1)  # the interpreter's path: the function's name
    got = _argv_through_bash(script, "python_here", tmp_path)
    assert got == want[1:], (got, want)
    assert not list(tmp_path.glob("P*")), "a name was run by the shell"


def test_the_scrontab_entry_keeps_every_argument_and_refuses_a_line_feed(tmp_path: Path) -> None:
    nasty = [s.format(d=tmp_path) for s in NASTY[:5]]
    argv = ["cluster", "sweep", "--results", nasty[0], "--partition", nasty[1], "--spec", nasty[2], "--nodelist",
            nasty[3], "--qos", nasty[4], "--scrontab", "0 3 * * *"]
    head, entry = scrontab_line("0 3 * * *", argv).split("\n")
    assert head.startswith("#SCRON ") and entry.startswith("0 3 * * * trainready ")
    command = entry[len("0 3 * * * "):]
    assert _argv_through_bash(command, "trainready", tmp_path) == argv[:-2]
    assert not list(tmp_path.glob("P*")), "a name was run by the shell"
    with pytest.raises(UsageError, match="holds a line break"):  # a line feed would start a second entry
        scrontab_line("0 3 * * *", ["cluster", "sweep", "--results", "/r\n* * * * * touch /tmp/PWNED"])
    for schedule in ("0 3 * * `id`", "0 3 * * $(id)", "@daily;id"):
        with pytest.raises(UsageError, match="expected a cron schedule"):
            scrontab_line(schedule, ["cluster", "sweep"])
    assert scrontab_line("@weekly", ["cluster", "sweep"]).endswith("@weekly trainready cluster sweep")


def test_the_sbcast_wrapper_passes_the_node_step_as_arguments_never_as_text(tmp_path: Path) -> None:
    from trainready.distribute import nodes as distribute
    from trainready.image.record import ImageRecord

    name = "x$(touch P3)`touch P4`'\" \nb.sqsh"
    rec = ImageRecord(tmp_path / "r.json", {"sha256": "sha256:" + "0" * 64, "size_bytes": 1})
    job = distribute.Job(tmp_path / name, rec, f"{tmp_path}/d $(touch P5)", via="sbcast")
    argv = distribute.sbcast_wrapped(job, ["n1"])
    script = argv[argv.index("-c") + 1]
    assert name not in script and job.dest not in script and "$(" not in script  # the text is constant
    assert argv[argv.index("-c") + 3:] == distribute.step_argv(job, ["n1"])
    env = distribute.sbcast_env(job, ["n1"])
    assert env["TR_SBCAST"] == str(job.sqsh) and len(env["TR_TOKEN"]) == 16
    assert env["TR_TOKEN"] != distribute.sbcast_env(job, ["n1"])["TR_TOKEN"]  # not predictable from the job id
