"""Confirm a straggler before naming it: each suspect's pair measured again alone, beside a reference pair.

The pairwise matrix (straggler.py) runs n/2 pairs at once.  Where ranks outnumber CPU cores (gloo: 8 ranks on a
2-core host) or something else on the host works in bursts (a file upload, a page-cache flush, a monitoring
agent), one pair's slot can be slow in every pass of the matrix with nothing wrong with either rank: on a 2-core
x86 VM, 4 of 13 runs beside bursty background work named a healthy link at 3.3-4.5x the median.

So the matrix only nominates suspects.  Each suspect is then measured with nothing else of the group running:
its pair exchanges while every other rank waits in a barrier, alternating with a reference pair of two
unsuspected ranks, ROUNDS times; each keeps its best (lowest) figure.  A rank or link is named only when its pair
alone is still more than the floor times the reference alone.  A real slow rank or link is slow alone too (a
planted 20 ms-per-exchange rank: > 10x); a pair that was slow only because it shared cores or met a burst is not.

The reference's own rounds say how noisy the host was while it measured: a suspect is named only when, beyond its
best being the floor times the reference's best, *every* round of the suspect's pair was slower than *every*
round of the reference pair (the two samples of ROUNDS rounds each do not overlap: by chance alone, with nothing
slower, that happens once in C(10, 5) = 252 orderings).  Where the suspect beats the floor but the samples overlap
(on a 2-core x86 VM at load average 5-7: a healthy link 8.3x its reference's best round alone, the reference's
own rounds ranging over 10x), the verdict is "not judged": the host's noise, measured, is as large as the
slowness.  A planted 20 ms-per-exchange link beside two busy loops at load average 18: its best round 28.5 ms,
the reference's rounds 2.2-10.3 ms: named.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable

ROUNDS = 5  # alternating (suspect, reference) measurements per probe, the best of each kept
MIN_LOOP_S = 0.05  # each timed loop at least this long, seconds: a few of Linux CFS's 4 ms slices (gloo on CPU)
MAX_ITERS = 200  # cap on exchanges per timed loop (a fast NVLink pair at 64 MiB: ~0.2 ms per exchange)


@dataclass(frozen=True)
class Probe:
    """One suspect and the two pairs that judge it."""

    kind: str
    """'rank' or 'link'."""
    subject: tuple[int, ...]
    """(rank,) or (rank_a, rank_b)."""
    test: tuple[int, int]
    """The pair measured for the suspect: the link itself, or the rank with its median healthy partner."""
    ref: tuple[int, int] | None
    """A pair of two unsuspected ranks; None where the group has none (then the suspect cannot be judged)."""


@dataclass(frozen=True)
class ProbeResult:
    """What the solo measurement found for one probe."""

    probe: Probe
    test_s: float
    """Best seconds per exchange of the suspect's pair alone."""
    ref_s: float
    """Best seconds per exchange of the reference pair alone (NaN without a reference)."""
    matrix_ratio: float
    """The suspect's figure in the matrix against the matrix median (what nominated it)."""
    ref_worst_s: float = math.nan
    """Worst (highest) round of the reference pair alone: the host's noise while it measured (NaN: not kept)."""
    test_worst_s: float = math.nan
    """Worst round of the suspect's pair alone."""

    @property
    def ratio(self) -> float:
        """Suspect alone / reference alone (NaN without a reference)."""
        return self.test_s / self.ref_s if self.ref_s > 0 else math.nan

    def confirmed(self, floor: float) -> bool:
        return not math.isnan(self.ratio) and self.ratio > floor

    def beyond_noise(self, floor: float) -> bool:
        """Confirmed, and the suspect's best round slower than the reference's worst: no round of the healthy pair
        was as slow as any of the suspect's (a record without the worst rounds judges by the bests alone)."""
        worst = self.ref_s if math.isnan(self.ref_worst_s) else self.ref_worst_s
        return self.confirmed(floor) and self.test_s > worst

    def as_dict(self) -> dict[str, Any]:
        p = self.probe
        return {"kind": p.kind, "subject": list(p.subject), "test": list(p.test), "ref": list(p.ref) if p.ref else None,
                "test_s": self.test_s, "ref_s": self.ref_s, "ratio": self.ratio,
                "test_worst_s": self.test_worst_s, "ref_worst_s": self.ref_worst_s,
                "matrix_ratio": self.matrix_ratio}


def plan_probes(matrix: list[list[float]], slow_ranks: list[int], slow_links: list[list[int]]) -> list[Probe]:
    """One probe per suspect.  Deterministic in the matrix: every rank computes the same plan from the
    all_gathered figures, so no extra message is needed to agree on it."""
    n = len(matrix)
    suspects = set(slow_ranks) | {r for link in slow_links for r in link}
    healthy = [r for r in range(n) if r not in suspects]
    probes = []
    for r in slow_ranks:
        partners = sorted((j for j in healthy), key=lambda j: matrix[r][j])
        test = _pair(r, partners[len(partners) // 2]) if partners else None
        if test is not None:
            probes.append(Probe("rank", (r,), test, _reference(matrix, healthy, test)))
    for i, j in slow_links:
        others = [r for r in range(n) if r not in slow_ranks]
        probes.append(Probe("link", (i, j), (i, j), _reference(matrix, others, (i, j))))
    return probes


def _pair(a: int, b: int) -> tuple[int, int]:
    return (min(a, b), max(a, b))


def _reference(matrix: list[list[float]], allowed: list[int], test: tuple[int, int]) -> tuple[int, int] | None:
    """The median-time pair among `allowed` ranks, disjoint from `test` where such a pair exists."""
    pairs = [(a, b) for a in allowed for b in allowed if a < b and (a, b) != test]
    disjoint = [p for p in pairs if not set(p) & set(test)]
    pool = sorted(disjoint or pairs, key=lambda p: matrix[p[0]][p[1]])
    return pool[len(pool) // 2] if pool else None


def loop_iters(seconds: float, floor_iters: int) -> int:
    """Exchanges per solo loop: enough for MIN_LOOP_S at the pair's matrix figure, at least `floor_iters`."""
    want = math.ceil(MIN_LOOP_S / seconds) if seconds > 0 else floor_iters
    return max(floor_iters, min(MAX_ITERS, want))


def run_probes(ctx: Any, group: Any, probes: list[Probe], matrix: list[list[float]], floor_iters: int,
               exchange: Callable[[int], Callable[[], None]], delay: Callable[[int], float]) -> list[list[float]]:
    """Runs in every rank: each probe's pairs alone, ROUNDS times alternating; returns [probe][test, ref, test_worst,
    ref_worst] seconds per exchange, best and worst round (the slower endpoint of each pair, as in the matrix; NaN
    where no reference).
    `exchange(peer)` builds this rank's exchange with `peer`; `delay(peer)` is a planted per-exchange
    sleep (tests only)."""
    import torch
    import torch.distributed as dist

    from trainready.comm.timing import warm_then_time

    r = ctx.rank
    rows = torch.zeros((ROUNDS, max(1, len(probes)), 2), dtype=torch.float64, device=ctx.device)
    for k in range(ROUNDS):
        for p, probe in enumerate(probes):
            for col, pair in enumerate((probe.test, probe.ref)):
                if pair is None:
                    continue
                iters = loop_iters(matrix[pair[0]][pair[1]], floor_iters)
                peer = pair[1] if r == pair[0] else pair[0] if r == pair[1] else None
                t = warm_then_time(ctx, group, exchange(peer) if peer is not None else None, iters,
                                   delay(peer) if peer is not None else 0.0)
                if peer is not None:
                    rows[k, p, col] = t
                dist.barrier(group=group)  # nobody starts the next pair while this one still runs
    dist.all_reduce(rows, op=dist.ReduceOp.MAX, group=group)  # the slower endpoint of each pair
    best, worst = rows.min(dim=0).values.cpu().tolist(), rows.max(dim=0).values.cpu().tolist()
    nan = math.nan
    return [[b[0], b[1] if probe.ref is not None else nan, w[0], w[1] if probe.ref is not None else nan]
            for b, w, probe in zip(best, worst, probes)]


def probe_of(d: dict[str, Any]) -> Probe:
    """A Probe from its dict (as rank 0 hands it back)."""
    ref = d.get("ref")
    return Probe(d["kind"], tuple(d["subject"]), (d["test"][0], d["test"][1]), (ref[0], ref[1]) if ref else None)


def results(probes: list[dict[str, Any]], times: list[list[float]], matrix: list[list[float]],
            score: list[float]) -> list[ProbeResult]:
    """Probe results, each with the figure that nominated it (a rank: its median over peers; a link: its pair)."""
    med = statistics.median(score) if score else math.nan
    out = []
    for probe, t in zip(map(probe_of, probes), times):
        nominated = score[probe.subject[0]] if probe.kind == "rank" else matrix[probe.subject[0]][probe.subject[1]]
        worst = (t[2], t[3]) if len(t) >= 4 else (math.nan, math.nan)  # records before the worst rounds were kept
        out.append(ProbeResult(probe, t[0], t[1], nominated / med if med > 0 else math.nan, worst[1], worst[0]))
    return out


def subject(p: ProbeResult) -> str:
    return f"rank {p.probe.subject[0]}" if p.probe.kind == "rank" else f"link {p.probe.subject[0]}<->{p.probe.subject[1]}"


def named(p: ProbeResult) -> str:
    ref = p.probe.ref
    return (f"{subject(p)} slow ({p.matrix_ratio:.1f}x the median in the matrix; alone {p.ratio:.1f}x "
            f"pair {ref[0]}<->{ref[1]})" if ref else subject(p))


def too_noisy(p: ProbeResult, floor: float) -> str:
    ref = p.probe.ref or (0, 0)
    return (f"{subject(p)} alone {p.ratio:.1f}x pair {ref[0]}<->{ref[1]} at their best (> {floor:g}x), but that "
            f"healthy pair's own rounds ranged {p.ref_s * 1e3:.3g}-{p.ref_worst_s * 1e3:.3g} ms, so the suspect's "
            f"best {p.test_s * 1e3:.3g} ms is within the host's noise")


def cleared(p: ProbeResult) -> str:
    return (f"{subject(p)} was {p.matrix_ratio:.1f}x the median in the matrix, {p.ratio:.2f}x a healthy pair "
            "when measured alone: not a fault")
