"""Every default of a comm sweep, one row per backend: `trainready comm`, the node check `comm` and the
cross-node all_reduce (`cluster run`, `cluster pairs`) all read this table.  Where one use deliberately differs
from the others the difference is its own field, named for that use, with its reason.

Sizes follow nccl-tests -b/-e/-f (bytes, stepped by a factor); warm-up and iterations nccl-tests -w/-n.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    """A size range like nccl-tests -b/-e/-f."""

    min_bytes: int
    """Smallest message, bytes."""
    max_bytes: int
    """Largest message, bytes (the last step is the largest min x factor^k at or below it)."""
    factor: int
    """Each step multiplies the size by this."""

    def steps(self, min_bytes: int | None = None) -> list[int]:
        """The sizes run, smallest first (from `min_bytes` instead of the range's own smallest when given)."""
        from trainready.hardware.collectives import size_steps

        return size_steps(self.min_bytes if min_bytes is None else min_bytes, self.max_bytes, self.factor)


@dataclass(frozen=True)
class SweepDefaults:
    """One backend's sweep defaults."""

    warmup: int
    """Untimed ops before each timed loop (nccl-tests -w): `trainready comm` and the cross-node all_reduce."""
    iters: int
    """Timed ops per loop, back to back with one sync at the end (nccl-tests -n): the same two uses."""
    step_budget_s: float
    """Shorten one step's timed loop to about this many seconds (at least 1 op); 0 = never."""
    pair_bytes: int
    """Message size of the pairwise send/recv matrix, bytes."""
    pair_iters: int
    """Exchanges per peer in the pairwise matrix of `trainready comm`."""
    eff_loops: int
    """Alternating (op, ring send/recv) loop pairs of comm.efficiency's same-run reference per judged size."""
    eff_min_loop_s: float
    """With that reference: each timed loop at least this long, seconds (0 = no floor)."""
    comm_sizes: Sizes
    """`trainready comm`'s sweep."""
    cross_sizes: Sizes
    """The cross-node all_reduce of `cluster run` and `cluster pairs`."""
    check_sizes: Sizes
    """The node check `comm`: a short sweep, part of `trainready node`."""
    check_warmup: int
    """The node check's warm-up per loop: it keeps the fastest of `check_loops` loops, so it warms less per loop."""
    check_iters: int
    """The node check's timed ops per loop (x `check_loops` loops per size)."""
    check_loops: int
    """The node check's timed loops per size, the fastest kept (1 = nccl-tests)."""
    check_pair_iters: int
    """Exchanges per peer in the node check's pairwise matrix."""


SWEEP_DEFAULTS: dict[str, SweepDefaults] = {
    # NCCL on GPUs: nccl-tests' usual -w 5 -n 20; CUDA events time each loop, so one loop per size suffices.
    "nccl": SweepDefaults(
        warmup=5, iters=20, step_budget_s=0.0,
        # 64 MiB on NVLink: ~0.2 ms at ~400 GB/s, bandwidth-bound rather than latency-bound
        pair_bytes=64 << 20, pair_iters=5,
        eff_loops=3, eff_min_loop_s=0.0,  # CUDA events time NCCL: 3 pairs, no loop floor
        comm_sizes=Sizes(8, 1 << 30, 2),  # nccl-tests' own 8 B..1 GiB x2
        # 1 MiB..1 GiB x4: the busbw plateau of IB all_reduce is above ~256 MiB (nccl-tests)
        cross_sizes=Sizes(1 << 20, 1 << 30, 4),
        check_sizes=Sizes(1 << 20, 1 << 30, 2),  # 1 MiB..1 GiB x2, where the spec's busbw expectations apply
        check_warmup=5, check_iters=20, check_loops=1, check_pair_iters=5,
    ),
    # gloo on a CPU node: -w 2 -n 10, sizes x4 and a 0.5 s per-step budget so an 8-rank sweep to 64 MiB
    # fits in a minute on a 2-core x86 VM.
    "gloo": SweepDefaults(
        warmup=2, iters=10, step_budget_s=0.5,
        pair_bytes=1 << 20,  # 1 MiB per exchange: ~ms per exchange, noise well above timer resolution
        pair_iters=5,
        # on gloo the efficiency ratio's run-to-run spread fell from 6% with 3 pairs to ~2% with 12 (a 2-core
        # x86 VM, 10 runs each); a loop of a few ms on 8 ranks sharing 2 cores times the scheduler's slices
        # (4 ms), not the op: each timed loop at least 0.1 s
        eff_loops=12, eff_min_loop_s=0.1,
        comm_sizes=Sizes(1 << 10, 64 << 20, 4),
        cross_sizes=Sizes(1 << 10, 1 << 20, 4),  # seconds on a shared host
        check_sizes=Sizes(1 << 10, 1 << 20, 4),  # latency and small-bandwidth regime, seconds
        # gloo shares the CPU with the host: the node check keeps the best of 3 timed loops per size (a 2-core
        # x86 VM under load: run-to-run busbw spread 0.18-0.42 instead of 0.24-0.53 with one loop); 1 warm-up
        # + 5 timed ops per loop keep its 3 loops (15 timed ops per size) to seconds; 3 pairwise exchanges
        check_warmup=1, check_iters=5, check_loops=3, check_pair_iters=3,
    ),
}


def sweep_defaults(backend: str) -> SweepDefaults:
    """The defaults of `backend` ('nccl' or 'gloo')."""
    return SWEEP_DEFAULTS[backend]
