"""The nccl-tests parser on REAL outputs captured on the lent H200 (nccl-tests 2.19.6,
NCCL 2.28.3, one GPU, -b 1M -e 1G -f 2): tests/data/nccl_tests/*_perf_h200x1.txt."""

from pathlib import Path

import pytest

from trainready.comm.table import parse

DATA = Path(__file__).parent / "data" / "nccl_tests"


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
def test_parse_real_capture(op):
    p = parse((DATA / f"{op}_perf_h200x1.txt").read_text())
    sizes = [r.size for r in p.rows]
    assert sizes == [2**20 * 2**k for k in range(11)]  # 1 MiB .. 1 GiB, factor 2
    assert p.groups == ("out-of-place", "in-place")
    last = p.rows[-1]
    assert last.size == 1073741824 and last.type == "float"
    oop = last.groups["out-of-place"]
    # algbw = S / t (GB = 1e9): checked against the printed time, to the printed precision
    assert oop.algbw == pytest.approx(last.size / (oop.time_us * 1e-6) / 1e9, rel=2e-3)
    assert oop.busbw == 0.0 and oop.wrong == 0  # one rank: busbw factor is 0
    assert p.avg_busbw == 0.0 and p.wrong_total == 0 and p.ranks == 1


def test_all_reduce_capture_values():
    p = parse((DATA / "all_reduce_perf_h200x1.txt").read_text())
    first = p.rows[0].groups["out-of-place"]
    assert (first.time_us, first.algbw) == (6.77, 154.80)
