"""The straggler's confirmation: the matrix nominates, the suspect's pair measured alone decides."""

from __future__ import annotations

from dataclasses import asdict

from trainready.comm.confirm import Probe, loop_iters, plan_probes
from trainready.comm.evaluate import judge_pairs
from trainready.comm.straggler import analyse
from trainready.records import Status


def _uniform(n: int, s: float = 1e-3) -> list[list[float]]:
    return [[0.0 if i == j else s * (1 + 0.01 * ((i + j) % 3)) for j in range(n)] for i in range(n)]


def _with_link(n: int, a: int, b: int, x: float) -> list[list[float]]:
    m = _uniform(n)
    m[a][b] = m[b][a] = m[a][b] * x
    return m


def _pairs(matrix: list[list[float]], times: list[list[float]]) -> dict:  # type: ignore[type-arg]
    a = analyse(matrix, 3.0)
    probes = plan_probes(matrix, a["slow_ranks"], a["slow_links"])
    return {"matrix": matrix, "probes": [asdict(p) for p in probes], "times": times}


def test_a_link_slow_in_the_matrix_but_not_alone_is_not_named() -> None:
    m = _with_link(8, 0, 2, 4.5)  # a burst over one pair's slot in every pass: 4.5x in the matrix
    fault = judge_pairs(_pairs(m, [[9e-3, 1e-3]]), 8, 1 << 20, "gloo")  # alone still 9x a healthy pair
    assert fault.status == Status.FAIL and "link 0<->2 slow" in fault.message
    assert fault.details["slow_links"] == [[0, 2]]
    noise = judge_pairs(_pairs(m, [[1.1e-3, 1e-3]]), 8, 1 << 20, "gloo")  # alone 1.1x: it was the load
    assert noise.status == Status.PASS and "not a fault" in noise.message
    assert noise.details["slow_links"] == [] and noise.details["nominated"]["links"] == [[0, 2]]


def test_a_slow_rank_is_probed_with_a_healthy_partner_against_a_disjoint_healthy_pair() -> None:
    m = _uniform(8)
    for j in range(8):
        if j != 5:
            m[5][j] = m[j][5] = 10e-3
    a = analyse(m, 3.0)
    assert a["slow_ranks"] == [5]
    (probe,) = plan_probes(m, a["slow_ranks"], a["slow_links"])
    assert probe.kind == "rank" and 5 in probe.test and probe.ref is not None
    assert 5 not in probe.ref and not set(probe.ref) & set(probe.test)


def test_a_suspect_with_no_unsuspected_pair_to_measure_against_warns_never_passes() -> None:
    m = _uniform(3)
    for j in range(3):
        if j != 1:
            m[1][j] = m[j][1] = 10e-3
    probes = [Probe("rank", (1,), (0, 1), None)]
    out = judge_pairs({"matrix": m, "probes": [asdict(p) for p in probes], "times": [[9e-3, float("nan")]]},
                      3, 1 << 20, "gloo")
    assert out.status == Status.WARN and "not judged" in out.message


def test_solo_loops_last_long_enough_to_outrun_the_scheduler_slice() -> None:
    assert loop_iters(1e-3, 3) == 50  # 0.05 s at 1 ms per exchange
    assert loop_iters(0.15, 3) == 3  # a planted 150 ms rank: never fewer than asked
    assert loop_iters(1e-6, 3) == 200  # capped


def test_a_suspect_within_the_reference_pairs_own_noise_is_not_judged_one_beyond_it_is_named() -> None:
    """Measured on a 2-core VM at load average 5-7: a healthy link 8.3x its reference's best round alone, while
    the reference's own rounds ranged over 10x.  Its slowness is inside the host's measured noise: WARN, not
    judged, never FAIL.  A planted link (20 ms an exchange) is slower in every round than the reference's worst:
    FAIL, also beside two busy loops at load average 18 (its best 28.5 ms, the reference 2.24-10.3 ms)."""
    m = _with_link(8, 1, 2, 4.5)
    noisy = judge_pairs(_pairs(m, [[8.3e-3, 1e-3, 12e-3, 11e-3]]), 8, 1 << 20, "gloo")
    assert noisy.status == Status.WARN and noisy.message.startswith("pairwise send/recv of 1M B: not judged: "
                                                                       "link 1<->2 alone 8.3x pair"), noisy.message
    assert "own rounds ranged 1-11 ms" in noisy.message and noisy.details["slow_links"] == []
    planted = judge_pairs(_pairs(m, [[21e-3, 1e-3, 22e-3, 1.3e-3]]), 8, 1 << 20, "gloo")
    assert planted.status == Status.FAIL and "link 1<->2 slow" in planted.message
    assert planted.details["slow_links"] == [[1, 2]]
    (probe,) = planted.details["probes"]
    assert (probe["ref_worst_s"], probe["test_worst_s"]) == (1.3e-3, 22e-3)
    busy = judge_pairs(_pairs(m, [[28.5e-3, 2.24e-3, 35e-3, 10.3e-3]]), 8, 1 << 20, "gloo")
    assert busy.status == Status.FAIL and "link 1<->2 slow" in busy.message, busy.message
    assert judge_pairs(_pairs(m, [[10.2e-3, 2.24e-3, 35e-3, 10.3e-3]]), 8, 1 << 20, "gloo").status == Status.WARN
