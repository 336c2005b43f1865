"""The battery's inputs: the seeded random base is drawn in blocks whose bits do not depend on the host's cores,
an operand of one block is the plain seeded draw (the quick battery's inputs as captured on the H100s in
tests/data), and the operand made on the device equals the one cast on the host."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from trainready.fingerprint import patterns  # noqa: E402
from trainready.fingerprint.battery import flip  # noqa: E402
from trainready.fingerprint.ops import OPS, inputs, torch_dtype  # noqa: E402
from trainready.numerics.bounds import to_tf32_values  # noqa: E402


def test_one_block_is_the_plain_seeded_draw_and_more_blocks_are_seeded_apart(monkeypatch):
    monkeypatch.setattr(patterns, "BLOCK", 64)
    small = patterns.random_base((8, 8), operand=1)
    plain = torch.randn((8, 8), generator=torch.Generator().manual_seed(patterns.SEED + 1), dtype=torch.float64)
    assert torch.equal(small, plain)
    big = patterns.random_base((16, 12), operand=1)  # 192 elements: 3 blocks
    assert torch.equal(big.view(-1)[:64], plain.view(-1))
    second = torch.randn(64, generator=torch.Generator().manual_seed(patterns.SEED + 1 + patterns.BLOCK_SEED_STRIDE),
                         dtype=torch.float64)
    assert not torch.equal(big.view(-1)[64:128], big.view(-1)[:64])
    assert torch.equal(big.view(-1)[64:128], second)


def test_the_draw_is_the_same_on_one_core_and_on_many(monkeypatch):
    monkeypatch.setattr(patterns, "BLOCK", 1000)
    monkeypatch.setattr(patterns, "_BASES", {})
    many = patterns.random_base((100, 97), operand=0).clone()  # 10 blocks, drawn on every core this host gives
    monkeypatch.setattr(patterns, "_BASES", {})  # drawn again, not the process's kept copy
    monkeypatch.setattr(patterns.os, "sched_getaffinity", lambda _pid: {0})
    one = patterns.random_base((100, 97), operand=0)
    other = patterns.random_base((100, 97), operand=2)
    assert not torch.equal(one, other)
    assert torch.equal(one, many)


def test_a_base_is_drawn_once_per_process_and_never_handed_out_to_be_written(monkeypatch):
    monkeypatch.setattr(patterns, "BLOCK", 64)
    monkeypatch.setattr(patterns, "_BASES", {})
    drawn: list[int] = []
    real = patterns._draw_block
    monkeypatch.setattr(patterns, "_draw_block", lambda out, operand, block: (drawn.append(block), real(out, operand, block)))
    first = patterns.random_base((16, 12), operand=3).clone()
    assert drawn == [0, 1, 2]  # 192 elements: 3 blocks
    again = patterns.random_base((16, 12), operand=3)
    assert drawn == [0, 1, 2] and torch.equal(again, first)  # the same values, not drawn again
    made = patterns.make("random-7", (16, 12), "fp32", operand=3)
    made.add_(1.0)  # a caller's copy: the kept base is unchanged
    assert not torch.equal(made, first) and torch.equal(patterns.random_base((16, 12), operand=3), first)
    monkeypatch.setattr(patterns, "BLOCK", 32)  # another block size: other bits, drawn anew
    assert not torch.equal(patterns.random_base((16, 12), operand=3), first) and len(drawn) == 3 + 6


@pytest.mark.parametrize("op", [o for o in OPS if o.kind == "gemm" and o.dtype != "fp8"] + [OPS[-1]],
                         ids=lambda o: o.name)
@pytest.mark.parametrize("pattern", patterns.PATTERNS)
def test_the_operand_made_where_it_is_used_is_the_host_cast(op, pattern):
    got = inputs(op, pattern, "cpu", "cpu")
    for i, (native, as64) in enumerate(got.values()):
        scale = op.big if i == 0 else -op.big
        host = patterns.make(pattern, tuple(native.shape), op.dtype, i, scale).to(torch_dtype(op.dtype))
        if op.dtype == "tf32":
            host = to_tf32_values(host)
        flipped = host.clone()
        flip(flipped, 0, 0)  # the last stored bit of the first element
        assert not torch.equal(native, flipped)
        assert torch.equal(native, host) and torch.equal(as64, host.double())
