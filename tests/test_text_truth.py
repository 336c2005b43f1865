"""What users read describes the tool and figures measured on a named machine, never how the tool was made:
no "session", "issue N", "dev VM", "device notes", "the seed" (the bring-up guide) in src/, docs/, README,
pyproject, benchmarks/, scripts/ and the tests' own comments, in --help or in `spec show`.  docs/architecture.md's Layout
names the folders that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO, run_cli

# Each: the project-history phrase it stands for.  Comments and text are joined across line breaks first, so a
# phrase wrapped onto the next line ("2-core dev\n# VM") is still found.
HISTORY = [
    r"\bsessions?\b",  # "the session's device time ran out", "two sessions", "Session of 2026-12-03"
    r"\bissue(?:\s+\d+|:)",  # "(issue 6)", "Target (issue 10)", "# issue: ... in <= 2 s"
    r"\bdev\s+(?:VM|machine|box)\b",  # say which machine: "a 2-core x86 VM", "1x H200"
    r"\bdevice\s+notes\b",
    r"\bdiffered\s+~?[\d.]+x\s+here\b",
    r"\bseed\s+\d{3}\b",  # "Seed 000", "seed 003's trap": the bring-up guide, not a random seed
    r"\bthe\s+seed's\b",
    r"\bseed\s+(?:rule|reference)\b",  # as tests/test_startup_help.py's PROJECT_NOTES, over comments and docs too
    r"\bthe\s+seed\s+gives\b",
]
PATTERN = re.compile("|".join(f"(?:{p})" for p in HISTORY), re.IGNORECASE)


def _user_visible() -> list[Path]:
    files = [REPO / "README.md", REPO / "pyproject.toml"]
    for where, globs in (("src", ("*.py", "*.toml")), ("docs", ("*.md",)), ("benchmarks", ("*.py",)),
                         ("scripts", ("*",))):
        files += [p for g in globs for p in sorted((REPO / where).rglob(g)) if p.is_file() and "egg-info" not in str(p)]
    return files


def test_no_history_words_in_test_comments() -> None:
    """The tests' docstrings and comments too ("session" aside: pytest's own word for a test run); this file
    and tests/test_startup_help.py hold the planted phrases."""
    planted = {"test_text_truth.py", "test_startup_help.py"}
    pattern = re.compile("|".join(f"(?:{p})" for p in HISTORY if "session" not in p), re.IGNORECASE)
    found = {p.name: words for p in sorted((REPO / "tests").glob("*.py")) if p.name not in planted
             if (words := [m.group(0) for m in pattern.finditer(_joined(p.read_text()))])}
    assert found == {}, found


def _joined(text: str) -> str:
    return re.sub(r"[ \t]*\n[ \t]*(?:#[ \t]*)?", " ", text)


def history_words(text: str) -> list[str]:
    return [m.group(0) for m in PATTERN.finditer(_joined(text))]


def test_the_scan_finds_what_it_looks_for() -> None:
    planted = ("# on the 2-core dev\n# VM, seen in two sessions (issue 6)\n"
               "'''Seed 000: the seed's four questions'''\n(device notes); pairs differed ~3x here")
    assert history_words(planted) == ["dev VM", "sessions", "issue 6", "Seed 000",
                                      "the seed's", "device notes", "differed ~3x here"]
    # a random seed is not the bring-up guide
    assert history_words("rng.seed_all(cfg.seed)  # the seed may have changed; --seeds 5; seed=1234") == []


def test_no_history_words_in_user_visible_text() -> None:
    found = {str(p.relative_to(REPO)): words for p in _user_visible()
             if (words := history_words(p.read_text(errors="replace")))}
    # main 3148e0e: README.md ('dev VM'), docs/comm.md ('sessions', 'dev VM'), docs/measured-h200.md
    # ('session', 'Session', 'issue 6'), spec/floors.py, spec/model.py ('device notes'), suite/base.py and
    # six more ('the seed's', 'Seed 000'), commands/cluster_gate.py ('differed ~3x here'), pyproject.toml, ...
    assert found == {}, found


def _helps() -> dict[str, str]:
    import typer

    from trainready.cli import app

    root = typer.main.get_command(app)  # a click group (typer >= 0.24 vendors click: no import of it here)
    out: dict[str, str] = {}

    def walk(cmd, path: list[str], parent) -> None:  # type: ignore[no-untyped-def]
        ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent)
        out[" ".join(path)] = cmd.get_help(ctx)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name], ctx)

    walk(root, ["trainready"], None)
    return out


def test_no_history_words_in_help() -> None:
    helps = _helps()
    assert len(helps) > 10 and "trainready cluster run" in helps  # every command and subcommand was read
    found = {cmd: words for cmd, text in helps.items() if (words := history_words(text))}
    assert found == {}, found  # main 3148e0e: cluster pairs --floor-fraction ('differed ~3x here')


def test_spec_show_names_no_history() -> None:
    p = run_cli("spec", "show", "example:h200-8x")
    assert p.returncode == 0, p.stderr
    assert "gemm_min_fraction" in p.stdout  # the text the scan reads is the spec's documentation
    assert history_words(p.stdout) == [], history_words(p.stdout)  # main 3148e0e: '(device notes)'


ARCHITECTURE = REPO / "docs" / "architecture.md"  # its '## Layout' section: the package's folders, one row each


def _layout_folders() -> set[str]:
    readme = ARCHITECTURE.read_text()
    m = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", readme, re.MULTILINE | re.DOTALL)
    assert m, "docs/architecture.md has no '## Layout' section"
    rows = [line for line in m.group(1).splitlines() if line.startswith("| `")]  # the table, not the prose
    return {name for row in rows for name in re.findall(r"`([a-z_]+)/`", row)}


def test_readme_layout_names_every_folder_of_the_package() -> None:
    pkg = REPO / "src" / "trainready"
    folders = {p.name for p in pkg.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    named = _layout_folders()
    # main 3148e0e: the Layout named dist/ (now ranks/) and left out cluster/, compare/, bundle/, report/,
    # selftest/, util/
    assert named - folders == set(), f"docs/architecture.md Layout names folders that do not exist: {sorted(named - folders)}"
    assert folders - named == set(), f"docs/architecture.md Layout leaves out: {sorted(folders - named)}"


@pytest.mark.parametrize("module", ["cli.py", "suite/runner.py", "records.py", "errors.py"])
def test_readme_layout_names_the_top_level_modules(module: str) -> None:
    readme = ARCHITECTURE.read_text()
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    assert f"`{module}`" in section and (REPO / "src" / "trainready" / module).is_file()
