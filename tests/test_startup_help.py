"""Start-up and help: no torch before parsing, help that reads at 80 columns, one line for a missing package.

No timings here (benchmarks/startup.py prints them): what makes `--help` slow is importing torch,
so the tests assert which modules a command imported, in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import SRC

# Commands that must start without torch: help, version, spec show/check, plan.
LIGHT = (
    ["--help"],
    ["--version"],
    ["plan", "--help"],
    ["node", "--help"],
    ["resume", "--help"],
    ["comm", "--help"],
    ["env", "--help"],
    ["spec", "show"],
    ["spec", "check", "example:h200-8x"],
    ["cluster", "run", "--help"],
    ["plan", "--preset", "llama3-8b", "--gpus", "8", "--json", "-"],
)

_PROBE = """
import json, sys
from trainready.cli import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit:
    pass
sys.stderr.write("\\nLOADED=" + json.dumps(sorted(m for m in ("torch", "numpy", "pynvml") if m in sys.modules)) + "\\n")
"""


def _env(**extra: str) -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(SRC)
    e.update(extra)
    return e


def _loaded(args: list[str]) -> list[str]:
    p = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(args)], capture_output=True, text=True,
                       env=_env(COLUMNS="80"), timeout=120)
    m = re.search(r"LOADED=(\[.*\])", p.stderr)
    assert m, p.stderr
    return json.loads(m.group(1))


@pytest.mark.slow
@pytest.mark.parametrize("args", LIGHT, ids=" ".join)
def test_light_commands_do_not_import_torch(args: list[str]) -> None:
    assert "torch" not in _loaded(args)


@pytest.mark.slow
def test_the_probe_sees_torch_when_a_command_imports_it() -> None:
    """The planted case: `node --list` builds the check registry, which imports torch."""
    assert "torch" in _loaded(["node", "--list"])


HELP_PAGES = (["--help"], ["node", "--help"], ["env", "--help"], ["comm", "--help"], ["resume", "--help"],
              ["plan", "--help"], ["spec", "--help"], ["spec", "init", "--help"], ["spec", "show", "--help"],
              ["spec", "check", "--help"], ["cluster", "--help"], ["cluster", "run", "--help"],
              ["cluster", "resume", "--help"])


def _help(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    from trainready.cli import main

    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code in (0, None)
    return capsys.readouterr().out


@pytest.mark.parametrize("args", HELP_PAGES, ids=" ".join)
def test_help_fits_80_columns_without_cutting_words(args: list[str], capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = _help(args, capsys, monkeypatch)
    too_wide = [ln for ln in out.splitlines() if len(ln) > 80]
    assert not too_wide, too_wide
    assert "…" not in out, out  # no option name or word cut short
    commands = out.split("Commands:", 1)[1] if "Commands:" in out else ""
    assert not re.search(r"\w\.\.\.$", commands, re.M), commands  # no command summary cut at 45 characters
    if args != ["--help"]:
        assert "Examples:" in out
        # every example line is whole: it starts with a command (or a shell comment/continuation)
        block = out.split("Examples:", 1)[1].split("\n\n", 2)[1]
        prev = ""
        for line in block.splitlines():  # a command, a comment, or the continuation of a line ending in '\\'
            assert re.match(r"    (trainready |srun |# )", line) or (prev.endswith("\\") and line.startswith("      ")), line
            prev = line


def test_command_list_shows_each_first_paragraph_whole(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    out = _help(["--help"], capsys, monkeypatch)
    commands = " ".join(out.split("Commands:", 1)[1].split())
    assert "per-step loss (bitwise by default)." in commands  # resume's whole first paragraph
    assert "compute, layouts." in commands


def test_spec_show_has_no_empty_assignments(capsys: pytest.CaptureFixture[str]) -> None:
    from trainready.cli import main

    with pytest.raises(SystemExit):
        main(["spec", "show"])
    out = capsys.readouterr().out
    assert not re.search(r"^#\s*\w+ =\s*$", out, re.M), out
    assert "# model: unset (not checked)" in out


def test_missing_dependency_is_one_line_exit_2() -> None:
    """`python -S` leaves out site-packages: no typer, as on a host where the dependencies were never installed."""
    probe = subprocess.run([sys.executable, "-S", "-c", "import typer"], capture_output=True, text=True)
    assert probe.returncode != 0, "typer importable without site-packages: this test cannot plant the fault"
    p = subprocess.run([sys.executable, "-S", "-m", "trainready", "node"], capture_output=True, text=True,
                       env=_env(), timeout=120)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "'typer' is not installed" in lines[0] and "pip install typer" in lines[0] and "pip install ." in lines[0]


def test_missing_dependency_names_the_pip_distribution() -> None:
    from trainready.errors import missing_dependency

    assert "pip install nvidia-ml-py" in str(missing_dependency(ModuleNotFoundError("x", name="pynvml")))
    assert missing_dependency(ModuleNotFoundError("x", name="trainready.nope")) is None


PROJECT_NOTES = re.compile(r"\bseed(?:'s| 0\d\d| rule| reference)", re.I)  # "seed 003's rule", "the seed's ..."


def _user_strings(path: os.PathLike[str]) -> list[str]:
    """String constants a user can see: all but docstrings, whose help role is kept for commands/ (their help)."""
    import ast

    tree = ast.parse(open(path, encoding="utf-8").read())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node, clean=False):
            if not (isinstance(node, ast.FunctionDef) and "commands" in str(path)):
                docs.add(id(node.body[0].value))  # type: ignore[attr-defined]
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


@pytest.mark.slow
def test_user_facing_text_names_public_sources_not_project_notes() -> None:
    hits = [(str(p.relative_to(SRC)), s[:80]) for p in sorted(SRC.rglob("*.py")) for s in _user_strings(p)
            if PROJECT_NOTES.search(s)]
    hits += [(str(p.relative_to(SRC)), ln) for p in sorted(SRC.rglob("*.toml"))
             for ln in p.read_text().splitlines() if PROJECT_NOTES.search(ln)]
    assert not hits, hits


def test_the_notes_pattern_catches_what_it_must() -> None:
    assert PROJECT_NOTES.search("seed 003's rule of thumb (advice, not fact)")
    assert PROJECT_NOTES.search("The seed's reference server") and PROJECT_NOTES.search("Seed reference: 8x B200")
    assert not PROJECT_NOTES.search("# Seed of model init, dropout and the data order.")
