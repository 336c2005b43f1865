"""One-line mutations of every shipped spec through the spec loader: no traceback, every refusal one line naming
the file (exit 2 through the CLI), every non-finite number and every op-name typo refused.

Mutations are generated in a fixed order from the files themselves (no randomness): each number set to a
non-finite value (inf, nan, 1e309 which TOML reads as inf) and to -1 and 0; each line deleted and duplicated;
each key misspelt; and each op-keyed table (spec/keys.py) given a misspelt op, an alias, a bad '@ranks', and a
valid key as the control that the table accepts at all.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Iterator, get_type_hints

import pytest

from conftest import run_cli
from trainready.errors import UsageError
from trainready.spec import load_spec
from trainready.spec.keys import op_tables
from trainready.spec.model import NodeSpec

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "src/trainready/spec/examples").glob("*.toml"))
NON_FINITE = ("inf", "-inf", "nan", "1e309", "-1e309")
FINITE = ("-1", "0")
# A TOML number right after '=' (a bare value or one inside an inline table); strings are quoted, so never hit.
NUMBER = re.compile(r"(?<==)(\s*)([-+]?\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][-+]?\d+)?)(?=\s*(?:[,}#]|$))")
LEADING_KEY = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*=)")
# Dict fields of the spec keyed by something other than an op: Python distributions, metric names, host settings.
NOT_OP_KEYED = {"software.packages", "compare.metrics", "host.pins", "fingerprint.key", "fingerprint.entries",
                "fabric.nics", "fabric.rails"}  # keyed by RDMA device and by GPU index (spec/fabric.py validates them)
# A value each op table accepts, so that only the key decides (spec/keys.op_tables' value rules).
GOOD_VALUE = {"comm.expected_busbw_gbps": 300.0, "comm.expected_efficiency": 0.2, "comm.min_fraction_by_op": 0.75,
              "fleet.expected_busbw_gbps": 300.0}


def code_part(line: str) -> str:
    """The line before its comment ('#' outside a string)."""
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            return line[:i]
    return line


def typos(word: str) -> list[str]:
    """Deterministic misspellings of `word`: last letter dropped, one added, two middle letters swapped."""
    out = [word[:-1], word + "s"]
    mid = len(word) // 2
    if len(word) > 2 and word[mid - 1] != word[mid]:
        out.append(word[:mid - 1] + word[mid] + word[mid - 1] + word[mid + 1:])
    return [t for t in out if t != word]


def line_mutations(lines: list[str]) -> Iterator[tuple[str, str, list[str]]]:
    """(kind, label, mutated lines): numbers, deleted/duplicated lines and misspelt keys."""
    for i, line in enumerate(lines):
        if line.strip().startswith("#") or not line.strip():
            continue
        code = code_part(line)
        for m in NUMBER.finditer(code):
            for value in NON_FINITE + FINITE:
                kind = "non-finite" if value in NON_FINITE else "number"
                new = line[:m.start(2)] + value + line[m.end(2):]
                yield kind, f"line {i + 1}: {m.group(2)} -> {value}", lines[:i] + [new] + lines[i + 1:]
        yield "delete", f"line {i + 1} deleted", lines[:i] + lines[i + 1:]
        yield "duplicate", f"line {i + 1} twice", lines[:i + 1] + [line] + lines[i + 1:]
        key = LEADING_KEY.match(line)
        if key:
            for typo in typos(key.group(2)):
                new = key.group(1) + typo + line[key.end(2):]
                yield "key-typo", f"line {i + 1}: key {key.group(2)} -> {typo}", lines[:i] + [new] + lines[i + 1:]


def with_table(lines: list[str], table: str, key: str, op: str) -> list[str]:
    """`lines` with the op table `table` (e.g. 'fleet.expected_busbw_gbps') holding the one key `key`; its
    section's other op tables are dropped; min_fraction_by_op gets a valid expectation for `op` beside it."""
    section, field = table.split(".")
    body = [f'{field} = {{ "{key}" = {GOOD_VALUE[table]} }}']
    if field == "min_fraction_by_op":
        body.append(f'expected_busbw_gbps = {{ "{op}" = 300.0, "{key}" = 300.0 }}' if key == f"{op}@8" else
                    f'expected_busbw_gbps = {{ "{op}" = 300.0 }}')
    dropped = {t.split(".")[1] for t in GOOD_VALUE if t.startswith(section + ".")}
    out, current, placed = [], "", False
    for line in lines:
        head = re.match(r"^\s*\[([^\]]+)\]", line)
        if head:
            current = head.group(1).strip()
        if current == section and (m := LEADING_KEY.match(line)) and m.group(2) in dropped:
            continue
        out.append(line)
        if head and current == section:
            out += body
            placed = True
    return out if placed else out + ["", f"[{section}]", *body]


def op_mutations(lines: list[str]) -> Iterator[tuple[str, str, list[str]]]:
    """(kind, label, mutated lines) for every op table: 'op-typo' ones must be refused, 'op-valid' accepted."""
    for table, _ in op_tables(NodeSpec()):
        for op in table.ops:
            bad = typos(op) + [op.replace("_", ""), op.upper(), f"{op}@0", f"{op}@x", f"{op}@-8"]
            for key in dict.fromkeys(b for b in bad if b != op):
                yield "op-typo", f"{table.key}.{key}", with_table(lines, table.key, key, op)
            for key in (op, f"{op}@8"):
                yield "op-valid", f"{table.key}.{key}", with_table(lines, table.key, key, op)


def load(path: Path) -> str | None:
    """The loader's one-line refusal, or None when the spec loads (any other exception propagates)."""
    try:
        load_spec(path)
    except UsageError as exc:
        return str(exc)
    return None


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_one_line_mutations_of_shipped_specs(tmp_path: Path, example: Path) -> None:
    lines = example.read_text(encoding="utf-8").splitlines()
    path = tmp_path / example.name
    wrong: list[str] = []
    seen: dict[str, int] = {}
    for kind, label, mutated in [*line_mutations(lines), *op_mutations(lines)]:
        seen[kind] = seen.get(kind, 0) + 1
        path.write_text("\n".join(mutated) + "\n", encoding="utf-8")
        try:
            msg = load(path)
        except Exception as exc:  # a traceback for a user: the finding this test exists for
            wrong.append(f"{kind} {label}: {type(exc).__name__}: {exc}")
            continue
        if msg is not None and ("\n" in msg or str(path) not in msg):
            wrong.append(f"{kind} {label}: not one line naming the file: {msg!r}")
        elif kind in ("non-finite", "op-typo", "key-typo") and msg is None:
            wrong.append(f"{kind} {label}: accepted")
        elif kind == "non-finite" and not ("expected a finite number" in msg or "expected an integer" in msg):
            wrong.append(f"{kind} {label}: refused for another reason: {msg}")
        elif kind == "op-typo" and not (f"key '{label}'" in msg and "op name" in msg):
            wrong.append(f"{kind} {label}: refused without naming the op key: {msg}")
        elif kind == "op-valid" and msg is not None:
            wrong.append(f"{kind} {label}: refused: {msg}")
    assert not wrong, f"{len(wrong)} of {sum(seen.values())} mutations:\n" + "\n".join(wrong[:20])
    assert seen["non-finite"] >= 5 and seen["op-typo"] >= 40 and seen["key-typo"] >= 5, seen


CLI_CASES = [  # (spec text, the key the one line must name)
    ("[fleet]\nexpected_busbw_gbps = { all_reduc = 360.0 }\n", "fleet.expected_busbw_gbps.all_reduc"),
    ("[fleet]\nexpected_busbw_gbps = { broadcast = 360.0 }\n", "fleet.expected_busbw_gbps.broadcast"),
    ("[resume]\nrtol = inf\n", "resume.rtol"),
    ("[resume]\natol = 1e309\n", "resume.atol"),
    ("[fleet]\nclock_offset_max_s = nan\n", "fleet.clock_offset_max_s"),
]


@pytest.mark.parametrize("body, key", CLI_CASES, ids=[k for _, k in CLI_CASES])
def test_cli_spec_check_refuses_with_one_line_exit_2(tmp_path: Path, body: str, key: str) -> None:
    p = tmp_path / "mutated.toml"
    p.write_text(body, encoding="utf-8")
    r = run_cli("spec", "check", str(p), timeout=60)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"trainready: error: {p}: key '{key}': expected ")
    assert "Traceback" not in r.stdout + r.stderr


def dict_fields(cls: Any, prefix: str = "") -> set[str]:
    """Dotted names of every dict-typed field of the spec model."""
    out: set[str] = set()
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            out |= dict_fields(tp, f"{prefix}{f.name}.")
        elif getattr(tp, "__origin__", None) is dict:
            out.add(f"{prefix}{f.name}")
    return out


def test_every_keyed_table_of_the_model_is_validated_or_named() -> None:
    """A new dict field keyed by an op must join spec/keys.op_tables, or be named here as keyed by else."""
    ops = {t.key for t, _ in op_tables(NodeSpec())}
    assert dict_fields(NodeSpec) - NOT_OP_KEYED == ops
    assert set(GOOD_VALUE) == ops
