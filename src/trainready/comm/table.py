"""nccl-tests' table: a formatter (our sweeps, same columns) and a parser (real nccl-tests output).

Column format as nccl-tests src/common.cu prints it: the row prefix
``%12li  %12li  %8s  %6s  %6i`` (size B, count elements, type, redop, root) and per
placement group (out-of-place, then in-place) ``  %7s  %6.2f  %6.2f  %5s``
(time us, algbw GB/s, busbw GB/s, #wrong or N/A); time printed with 2 decimals
below 100 us, 1 below 10000 us, none above.  The footer line
``# Avg bus bandwidth    : %g`` is nccl-tests' plain mean over every size.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

GROUPS = ("out-of-place", "in-place")
PREFIX_W = 52  # 12+2+12+2+8+2+6+2+6 characters
GROUP_W = 32  # 2+7+2+6+2+6+2+5 characters


@dataclass(frozen=True)
class Meas:
    time_us: float
    algbw: float  # GB/s (1e9 B/s)
    busbw: float  # GB/s
    wrong: int | None  # None: not checked (nccl-tests prints N/A)


@dataclass(frozen=True)
class Row:
    size: int  # bytes, nccl-tests' S
    count: int  # elements (per rank for all_gather / reduce_scatter / alltoall)
    type: str
    redop: str
    root: int
    groups: dict[str, Meas] = field(default_factory=dict)


@dataclass(frozen=True)
class Parsed:
    rows: tuple[Row, ...]
    groups: tuple[str, ...]
    avg_busbw: float | None  # nccl-tests' own footer figure
    ranks: int | None  # from the "#  Rank  N" device lines, when present
    wrong_total: int | None = None  # "# Out of bounds values : N"


def _time(us: float) -> str:
    if us >= 10000.0:
        return f"{us:7.0f}"
    if us >= 100.0:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


def header(groups: tuple[str, ...]) -> list[str]:
    line1 = "#" + " " * (PREFIX_W - 1) + "".join(g.center(GROUP_W) for g in groups)
    line2 = "#" + "size".rjust(11) + "  " + "count".rjust(12) + "  " + "type".rjust(8) + "  " + "redop".rjust(6)
    line2 += "  " + "root".rjust(6)
    line2 += "".join("  " + "time".rjust(7) + "  " + "algbw".rjust(6) + "  " + "busbw".rjust(6) + " " + "#wrong".rjust(6)
                     for _ in groups)
    line3 = "#" + "(B)".rjust(11) + "  " + "(elements)".rjust(12) + " " * 26
    line3 += "".join("  " + "(us)".rjust(7) + "  " + "(GB/s)".rjust(6) + "  " + "(GB/s)".rjust(6) + "  " + " " * 5
                     for _ in groups)
    return [line1.rstrip(), line2, line3.rstrip()]


def format_row(row: Row, groups: tuple[str, ...]) -> str:
    s = f"{row.size:12d}  {row.count:12d}  {row.type:>8s}  {row.redop:>6s}  {row.root:6d}"
    for g in groups:
        m = row.groups.get(g)
        if m is None:
            s += "  " + "-".rjust(7) + "  " + "-".rjust(6) + "  " + "-".rjust(6) + "  " + "-".rjust(5)
            continue
        wrong = "N/A" if m.wrong is None else str(m.wrong)
        s += f"  {_time(m.time_us)}  {m.algbw:6.2f}  {m.busbw:6.2f}  {wrong:>5s}"
    return s


def format_table(rows: list[Row], groups: tuple[str, ...] = GROUPS, avg_busbw: float | None = None,
                 extra_footer: list[str] | None = None) -> str:
    """The table as nccl-tests prints it; `avg_busbw` None → the plain mean of every busbw, as nccl-tests."""
    lines = header(groups) + [format_row(r, groups) for r in rows]
    if avg_busbw is None:
        bws = [m.busbw for r in rows for m in r.groups.values() if not math.isnan(m.busbw)]
        avg_busbw = sum(bws) / len(bws) if bws else 0.0
    wrong = [m.wrong for r in rows for m in r.groups.values() if m.wrong is not None]
    lines.append(f"# Out of bounds values : {sum(wrong)} {'OK' if sum(wrong) == 0 else 'FAILED'}")
    lines.append(f"# Avg bus bandwidth    : {avg_busbw:g} ")
    lines += extra_footer or []
    lines.append("#")
    return "\n".join(lines)


_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+|nan|inf)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")


def _num(tok: str) -> float:
    return float("nan") if tok in ("-", "N/A") else float(tok)


def parse(text: str) -> Parsed:
    """Rows of one nccl-tests *_perf run (stdout). Unrelated lines (NCCL INFO logs, banners) are skipped."""
    groups: tuple[str, ...] = GROUPS
    rows: list[Row] = []
    avg: float | None = None
    oob: int | None = None
    ranks: set[int] = set()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if "out-of-place" in line or "in-place" in line:
                found = re.findall(r"out-of-place|in-place", line)
                groups = tuple(found)
            elif (m := _RANK.match(line)) is not None:
                ranks.add(int(m.group(1)))
            elif (m := _AVG.match(line)) is not None:
                avg = float(m.group(1))
            elif (m := _OOB.match(line)) is not None:
                oob = int(m.group(1))
            continue
        tok = line.split()
        if len(tok) < 9 or not (tok[0].isdigit() and tok[1].isdigit()) or (len(tok) - 5) % 4:
            continue
        try:
            root = int(tok[4])
            meas: dict[str, Meas] = {}
            for k in range((len(tok) - 5) // 4):
                t, a, b, w = tok[5 + 4 * k: 9 + 4 * k]
                name = groups[k] if k < len(groups) else f"group{k}"
                if t == "-":
                    continue
                meas[name] = Meas(_num(t), _num(a), _num(b), None if w in ("N/A", "-") else int(float(w)))
        except ValueError:
            continue  # a log line that happens to start with two numbers
        rows.append(Row(int(tok[0]), int(tok[1]), tok[2], tok[3], root, meas))
    return Parsed(tuple(rows), groups, avg, (max(ranks) + 1) if ranks else None, oob)
