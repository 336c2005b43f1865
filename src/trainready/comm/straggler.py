"""Name a slow rank or link: a pairwise send/recv matrix and a robust outlier rule.

Schedule: the circle method (round-robin tournament) gives n-1 rounds (n even;
n rounds with one rank idle when n is odd) in which every rank meets every other
exactly once; the pairs of a round run at the same time.  In each pair both ranks
send `nbytes` to each other at once (isend + irecv), `iters` times; each rank
records seconds per exchange.  M[i][j] = the slower of the two endpoints' figures.
The whole schedule runs PASSES times and each pair keeps its best (lowest) figure:
a real slow rank or link is slow in every pass, while a rank that the OS preempted
once (8 ranks on 2 CPU cores) is not, so noise is not named as a straggler.

Rule (Iglewicz & Hoaglin 1993, "How to Detect and Handle Outliers": modified
z-score M = 0.6745 (x - median) / MAD, outlier when M > 3.5), one-sided (slow only),
plus a floor of 2x the median (3x on gloo, where ranks share CPU cores) so that jitter on an otherwise uniform machine
(MAD near 0) never names a rank:
* rank score = median over its partners of M[r][j]; a slow rank is slow with everyone;
* a pair that is an outlier among all pairs is a slow link, unless an endpoint named as a slow rank explains it:
  a pair of a slow rank is a link too only when it is also more than the floor times that rank's own median
  over its partners.  A slow link nominates its link, never only its rank: on a busy host one endpoint can be
  slow with everyone in the matrix (and is then cleared alone), and the link it also carries must still be
  measured alone and named or cleared as a link.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict
from typing import Any, Callable

Z_LIMIT = 3.5  # Iglewicz & Hoaglin's recommended modified-z cut-off
RATIO_FLOOR = 2.0  # and at least this many times the median (GPU links: a half-rate IB/NVLink is named)
# gloo ranks share CPU cores with each other and with whatever else runs: measured on a 2-core x86 VM,
# 8 ranks + 2 busy loops, best of 3 passes, 10 runs: the worst healthy pair reached 1.89x the median
# (2.6x once with a single pass).  3x keeps a margin; a planted 60 ms-per-exchange slow rank is > 10x.
RATIO_FLOOR_GLOO = 3.0
MAD_TO_SIGMA = 0.6745  # Φ^-1(0.75): makes MAD comparable to a standard deviation
PASSES = 3  # whole-schedule repetitions; each pair keeps its best figure (best-of-N, as above)


def rounds(n: int) -> list[list[tuple[int, int]]]:
    """Circle-method schedule: each round a list of disjoint pairs (a < b); all pairs once."""
    if n < 2:
        return []
    ids: list[int | None] = list(range(n)) + ([None] if n % 2 else [])
    k = len(ids)
    out = []
    for _ in range(k - 1):
        pairs = []
        for i in range(k // 2):
            a, b = ids[i], ids[k - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        out.append(sorted(pairs))
        ids = [ids[0], ids[-1]] + ids[1:-1]  # rotate all but the first
    return out


def best_of(passes: list[list[list[float]]]) -> list[list[float]]:
    """Element-wise minimum of several n x n matrices of seconds (one per pass)."""
    return [[min(m[i][j] for m in passes) for j in range(len(passes[0]))] for i in range(len(passes[0]))]


def pair_matrix_rank(ctx: Any, group: Any, nbytes: int, iters: int, floor: float,
                     delay: Callable[[int], float] = lambda peer: 0.0, passes: int = PASSES,
                     alone_delay: Callable[[int], float] | None = None) -> dict[str, Any] | None:
    """Runs in every rank: the n x n matrix of seconds per exchange (diagonal 0), each entry the best of
    `passes` runs of the whole schedule; then every suspect it nominates is measured again alone (confirm.py).
    Rank 0 returns {"matrix", "probes"}; `delay(peer)` is a planted sleep per exchange with `peer` (tests), in the
    solo re-measurement `alone_delay(peer)` (default: the same; a planted transient sleeps in the matrix only)."""
    import torch
    import torch.distributed as dist

    from trainready.comm.confirm import plan_probes, run_probes
    from trainready.comm.timing import warm_then_time

    n, r = ctx.world_size, ctx.rank
    rows = torch.zeros((passes, n), dtype=torch.float64, device=ctx.device)  # [pass][peer] seconds
    count = max(1, nbytes // 4)
    send = torch.full((count,), float(r), dtype=torch.float32, device=ctx.device)
    recv = torch.empty_like(send)

    def exchange(peer: int) -> Callable[[], None]:
        def call() -> None:
            ops = [dist.P2POp(dist.isend, send, peer, group), dist.P2POp(dist.irecv, recv, peer, group)]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        return call

    for k in range(passes):
        for pairs in rounds(n):
            peer = next((b if a == r else a for a, b in pairs if r in (a, b)), None)
            t = warm_then_time(ctx, group, exchange(peer) if peer is not None else None, iters,
                       delay(peer) if peer is not None else 0.0)
            if peer is not None:
                rows[k, peer] = t
    parts = [torch.empty_like(rows) for _ in range(n)]
    dist.all_gather(parts, rows, group=group)
    m = [p.cpu().tolist() for p in parts]  # [rank][pass][peer]: the same figures on every rank
    matrix = best_of([[[max(m[i][k][j], m[j][k][i]) for j in range(n)] for i in range(n)] for k in range(passes)])
    nominated = analyse(matrix, floor)  # the same on every rank: so is the plan of the probes
    probes = plan_probes(matrix, nominated["slow_ranks"], nominated["slow_links"])
    times = run_probes(ctx, group, probes, matrix, iters, exchange, alone_delay or delay) if probes else []
    if r != 0:
        return None
    return {"matrix": matrix, "probes": [asdict(p) for p in probes], "times": times}


def ratio_floor(backend: str) -> float:
    """The times-the-median floor for a backend (see RATIO_FLOOR / RATIO_FLOOR_GLOO)."""
    return RATIO_FLOOR_GLOO if backend == "gloo" else RATIO_FLOOR


def _outliers(values: dict[Any, float], floor: float) -> dict[Any, float]:
    """Keys whose value is a slow outlier; value = modified z-score (inf when MAD is 0)."""
    if len(values) < 3:
        return {}
    med = statistics.median(values.values())
    mad = statistics.median(abs(v - med) for v in values.values())
    out = {}
    for k, v in values.items():
        if v <= floor * med:
            continue
        z = MAD_TO_SIGMA * (v - med) / mad if mad > 0 else float("inf")
        if z > Z_LIMIT:
            out[k] = z
    return out


def analyse(matrix: list[list[float]], floor: float = RATIO_FLOOR) -> dict[str, Any]:
    """Slow ranks and slow links from an n x n matrix of seconds (diagonal ignored)."""
    n = len(matrix)
    score = {r: statistics.median(matrix[r][j] for j in range(n) if j != r) for r in range(n)} if n > 1 else {}
    slow_ranks = _outliers(score, floor)
    pairs = {(i, j): matrix[i][j] for i in range(n) for j in range(i + 1, n)}
    slow_links = {p: z for p, z in _outliers(pairs, floor).items()
                  if all(r not in slow_ranks or pairs[p] > floor * score[r] for r in p)}
    med = statistics.median(score.values()) if score else float("nan")
    return {
        "rank_score_s": [score[r] for r in range(n)] if score else [],
        "median_s": med,
        "slow_ranks": sorted(slow_ranks),
        "slow_links": sorted([list(p) for p in slow_links]),
        "rule": f"best of {PASSES} passes; modified z-score > {Z_LIMIT} (Iglewicz & Hoaglin) and > {floor:g}x median",
    }
