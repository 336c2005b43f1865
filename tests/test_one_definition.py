"""One definition of a fact, and no definition nothing uses (read from the source, the AST): the table of each
format's stored significand bits is written once (numerics/bounds.MANT_BITS) and the integer view of a tensor's
bits once (bounds.bits_view), where they were written three and four times and could drift apart; the functions
and classes nothing called are gone.  Each scan is first shown finding what it looks for."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "trainready"
REMOVED = {"RankFailure", "config_for", "is_file_ref", "samples_seen"}  # defined, never used (grep src tests)


def _trees(root: Path = SRC) -> dict[str, ast.Module]:
    return {p.relative_to(root).as_posix(): ast.parse(p.read_text(encoding="utf-8")) for p in root.rglob("*.py")}


def significand_tables(trees: dict[str, ast.Module]) -> list[str]:
    """Where a dict literal maps a float format to its stored significand bits ("bf16": 7)."""
    out = []
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict) and any(
                    isinstance(k, ast.Constant) and k.value == "bf16" and isinstance(v, ast.Constant) and v.value == 7
                    for k, v in zip(node.keys, node.values)):
                out.append(f"{rel}:{node.lineno}")
    return out


def bit_views(trees: dict[str, ast.Module]) -> list[str]:
    """Where code picks an integer dtype for a float tensor's bits (torch.int16 beside torch.int32)."""
    out = []
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Dict, ast.IfExp)):
                names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
                if {"int16", "int32"} <= names:
                    out.append(f"{rel}:{node.lineno}")
    return out


def defined(trees: dict[str, ast.Module], names: set[str]) -> list[str]:
    return [f"{rel}:{n.lineno} {n.name}" for rel, tree in trees.items() for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]


def test_the_scans_find_what_they_look_for(tmp_path):
    (tmp_path / "a.py").write_text('BITS = {"fp32": 23, "bf16": 7}\nclass RankFailure:\n    pass\n'
                                   'ity = torch.int16 if bf16 else torch.int32\n')
    trees = _trees(tmp_path)
    assert significand_tables(trees) == ["a.py:1"] and defined(trees, REMOVED) == ["a.py:2 RankFailure"]
    assert bit_views(trees) == ["a.py:4"]


def test_one_table_of_significand_bits_one_bit_view_and_no_dead_definitions():
    trees = _trees()
    files = lambda found: sorted(f.split(":")[0] for f in found)  # noqa: E731
    assert files(significand_tables(trees)) == ["numerics/bounds.py"]
    assert files(bit_views(trees)) == ["numerics/bounds.py"]
    assert defined(trees, REMOVED) == []
    from trainready.fingerprint import patterns
    from trainready.numerics import bounds, opbounds

    assert patterns.MANT_BITS is bounds.MANT_BITS and opbounds.OUT_BITS is bounds.MANT_BITS
