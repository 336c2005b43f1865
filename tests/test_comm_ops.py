"""busbw factors, sizes and byte counts against values worked by hand (nccl-tests doc/PERFORMANCE.md)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from trainready.comm.table import parse
from trainready.errors import UsageError
from trainready.hardware.collectives import OPS, bandwidths, counts_for, dtype_name, op_names, parse_size, size_steps

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    "op,n,factor",
    [
        ("all_reduce", 8, 1.75),  # 2*(8-1)/8
        ("all_reduce", 2, 1.0),  # 2*(2-1)/2
        ("all_reduce", 1, 0.0),
        ("all_gather", 8, 0.875),  # (8-1)/8
        ("reduce_scatter", 4, 0.75),  # (4-1)/4
        ("all_to_all", 16, 0.9375),  # (16-1)/16
        ("broadcast", 8, 1.0),
        ("sendrecv", 8, 1.0),
    ],
)
def test_busbw_factor_by_hand(op: str, n: int, factor: float) -> None:
    assert OPS[op].busbw_factor(n) == pytest.approx(factor, abs=1e-12)


def test_bandwidths_by_hand() -> None:
    # all_reduce of 1 GiB in 5 ms on 8 ranks: algbw = 1073741824 / 0.005 / 1e9 = 214.7483648 GB/s,
    # busbw = 214.7483648 * 1.75 = 375.8096384 GB/s.
    alg, bus = bandwidths("all_reduce", 1 << 30, 0.005, 8)
    assert alg == pytest.approx(214.7483648)
    assert bus == pytest.approx(375.8096384)
    # all_gather of S = 64 MiB total in 1 ms on 8 ranks: 67.108864 GB/s, busbw x 0.875 = 58.720256.
    alg, bus = bandwidths("all_gather", 64 << 20, 0.001, 8)
    assert (alg, bus) == (pytest.approx(67.108864), pytest.approx(58.720256))
    assert all(math.isnan(x) for x in bandwidths("broadcast", 8, 0.0, 8))


def test_counts_follow_nccl_tests_rounding() -> None:
    # all_reduce: count = S / 4 for float, no trimming.  Split ops: per-rank count = floor(S/4/n) rounded down
    # to a 16-byte multiple (nccl-tests src/all_gather.cu: base = (count/nranks) & ~(16/eltSize - 1)).
    assert counts_for("all_reduce", 1000, 8, 4) == (250, 1000)
    assert counts_for("all_gather", 1000, 8, 4) == (28, 28 * 8 * 4)  # 31 floats -> 28 (112 B), not 31
    assert counts_for("all_gather", 1000, 1, 4) == (248, 992)  # one rank trims too: 250 -> 248
    assert counts_for("reduce_scatter", 1 << 20, 6, 2) == (87376, 87376 * 6 * 2)  # 87381 bf16 -> 87376
    assert counts_for("all_to_all", 1000, 3, 8) == (40, 960)  # double: multiples of 2 elements
    assert counts_for("reduce_scatter", 64, 8, 4) == (0, 0)  # 2 floats per rank < 16 B: nothing to run
    assert counts_for("all_gather", 128, 8, 4) == (4, 128)  # 4 floats = 16 B per rank: kept
    assert counts_for("all_to_all", 1 << 20, 8, 2) == (65536, 1 << 20)
    assert counts_for("sendrecv", 1000, 3, 4) == (250, 1000)


def _requested_sizes(text: str) -> list[int]:
    """The -b/-e/-f sizes nccl-tests was asked for, from its '# nThread ... minBytes ... step: F(factor)' line."""
    m = re.search(r"minBytes (\d+) maxBytes (\d+) step: (\d+)\(factor\)", text)
    assert m, "captured output without its header"
    return size_steps(int(m.group(1)), int(m.group(2)), int(m.group(3)))


@pytest.mark.parametrize("path", sorted((DATA / "nccl_tests").glob("*_perf_*.txt")) + [DATA / "all_reduce_perf_8gpu.txt"],
                         ids=lambda p: p.name)
def test_counts_match_what_nccl_tests_printed(path: Path) -> None:
    """Every line nccl-tests printed in the captured outputs: the requested size gives its count and size."""
    text = path.read_text()
    p = parse(text)
    op = path.name.split("_perf")[0].replace("alltoall", "all_to_all")
    elem = {"float": 4, "half": 2, "bfloat16": 2, "double": 8}[p.rows[0].type]
    assert p.ranks and len(p.rows) == len(_requested_sizes(text))
    for req, row in zip(_requested_sizes(text), p.rows):
        assert counts_for(op, req, p.ranks, elem) == (row.count, row.size), (req, row)


def test_parse_size_is_nccl_tests_style() -> None:
    assert parse_size("8") == 8
    assert parse_size("1K") == 1024
    assert parse_size("64M") == 64 * 1024**2
    assert parse_size("1G") == 1024**3
    assert parse_size("2g") == 2 * 1024**3
    for bad in ("", "1X", "-8", "1.5M", "0", "M"):
        with pytest.raises(UsageError):
            parse_size(bad, "--max-bytes")


def test_size_steps_and_bad_ranges() -> None:
    assert size_steps(8, 64, 2) == [8, 16, 32, 64]
    assert size_steps(1024, 64 * 1024**2, 4)[-1] == 64 * 1024**2
    assert size_steps(8, 100, 10) == [8, 80]
    with pytest.raises(UsageError):
        size_steps(64, 8, 2)
    with pytest.raises(UsageError):
        size_steps(8, 64, 1)


def test_op_and_dtype_names() -> None:
    assert op_names(None) == list(OPS)
    assert op_names(["allreduce,alltoall", "all_reduce"]) == ["all_reduce", "all_to_all"]
    with pytest.raises(UsageError, match="unknown op 'reduce'"):
        op_names(["reduce"])
    assert dtype_name("bf16") == "bfloat16"
    with pytest.raises(UsageError):
        dtype_name("fp8")


def test_valid_expectation_key_grammar() -> None:
    from trainready.hardware.collectives import valid_expectation_key

    bad = ["allreduce", "all_reduce@", "all_reduce@0", "all_reduce@x", "all_reduce@8@2", "", "@8", "All_Reduce"]
    assert [k for k in bad if valid_expectation_key(k)] == []  # the mismatches first
    assert all(valid_expectation_key(k) for k in [*OPS, "all_reduce@8", "sendrecv@16"])
