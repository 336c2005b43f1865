"""nccl-tests table: formatter and parser, round trip, and a fixture in nccl-tests' exact output format.

tests/data/all_reduce_perf_8gpu.txt is written in the exact column format of nccl-tests'
all_reduce_perf (src/common.cu printf formats) with numbers typical of 8x H100 SXM; it
was produced by an independent printf-style writer, not by trainready's formatter.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainready.comm.table import Meas, Row, format_row, format_table, parse
from trainready.hardware.collectives import OPS

FIXTURE = Path(__file__).parent / "data" / "all_reduce_perf_8gpu.txt"


def test_parse_real_format_fixture() -> None:
    p = parse(FIXTURE.read_text())
    assert p.groups == ("out-of-place", "in-place")
    assert p.ranks == 8
    assert len(p.rows) == 31  # 8 B .. 8 GiB, factor 2
    first, last = p.rows[0], p.rows[-1]
    assert (first.size, first.count, first.type, first.redop, first.root) == (8, 2, "float", "sum", -1)
    assert last.size == 8589934592 and last.count == 2147483648
    assert last.groups["out-of-place"] == Meas(44086.0, 194.84, 340.98, 0)
    assert last.groups["in-place"].time_us == 43866.0
    assert p.avg_busbw == pytest.approx(120.56)
    assert p.wrong_total == 0
    # Our busbw factor agrees with the numbers nccl-tests printed (to its 2 decimals).
    f = OPS["all_reduce"].busbw_factor(p.ranks)
    for r in p.rows:
        m = r.groups["out-of-place"]
        assert m.busbw == pytest.approx(m.algbw * f, abs=0.02)
        assert m.algbw == pytest.approx(r.size / (m.time_us * 1e-6) / 1e9, rel=2e-3, abs=0.006)


def test_format_row_matches_nccl_tests_columns() -> None:
    row = Row(1073741824, 268435456, "float", "sum", -1,
              {"out-of-place": Meas(5000.0, 214.75, 375.81, 0), "in-place": Meas(123.456, 1.5, 2.625, None)})
    line = format_row(row, ("out-of-place", "in-place"))
    # %12li  %12li  %8s  %6s  %6i then "  %7s  %6.2f  %6.2f  %5s" per group, worked by hand:
    assert line == ("  1073741824     268435456     float     sum      -1"
                    "   5000.0  214.75  375.81      0    123.5    1.50    2.62    N/A")


def test_round_trip() -> None:
    rows = [Row(s, s // 4, "float", "sum", -1, {"in-place": Meas(t, s / t / 1e3, 1.75 * s / t / 1e3, w)})
            for s, t, w in ((8, 20.12, 0), (1 << 20, 150.25, 3), (1 << 30, 12345.0, 0))]
    text = format_table(rows, ("in-place",))
    back = parse(text)
    assert back.groups == ("in-place",)
    assert [r.size for r in back.rows] == [8, 1 << 20, 1 << 30]
    assert back.rows[1].groups["in-place"].wrong == 3
    assert back.wrong_total == 3
    for a, b in zip(rows, back.rows):
        ma, mb = a.groups["in-place"], b.groups["in-place"]
        assert mb.time_us == pytest.approx(ma.time_us, abs=0.5)
        assert mb.busbw == pytest.approx(ma.busbw, abs=0.005)
    assert back.avg_busbw == pytest.approx(sum(r.groups["in-place"].busbw for r in rows) / 3, rel=1e-5)


def test_parser_skips_noise() -> None:
    text = "12 34 NCCL INFO something\n#  Rank  3 Group 0\n" + FIXTURE.read_text().splitlines()[17] + "\n"
    p = parse(text)
    assert len(p.rows) == 1 and p.rows[0].size == 8 and p.ranks == 4
