"""Collective efficiency (comm.min_fraction_efficiency): each op's busbw over the busbw of a ring send/recv of
the same buffer, timed alternately in the same run (comm/sweep.alternate, comm/evaluate.row_efficiency).

A host whose load drifts slows both terms alike; a collective slow in itself (here: the planted
`comm.slow_pct`, which never slows the point-to-point reference) lowers the ratio.  Figures in the unit tests
are hand-made (exact); the end-to-end test plants a slowdown far beyond gloo's noise."""

from __future__ import annotations

import dataclasses
import statistics

import pytest

from trainready.comm.evaluate import OpTable, judge_efficiency, row_efficiency
from trainready.records import Status
from trainready.spec import load_spec
from trainready.spec.floors import SLOW_PROBE
from trainready.spec.init import derive
from trainready.util.strict import dump_toml

FIVE = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
WINDOW = {"from_bytes": str(256 << 10), "to_bytes": str(1 << 20)}
# 6 reference runs x 5 ops of efficiency / that op's median: ~2% run to run (measured on a 2-core x86 VM with
# 12 alternating loop pairs: 2.1-2.2%), while the same runs' absolute busbw drifted by 20% and more.
RUNS = [[1.00, 0.98, 1.02, 0.97, 1.03], [1.02, 1.01, 0.99, 1.03, 0.98], [0.99, 1.02, 1.01, 0.98, 1.00],
        [1.01, 0.97, 0.98, 1.02, 1.01], [0.98, 1.03, 1.00, 1.01, 0.99], [1.03, 0.99, 1.01, 0.99, 1.02]]
BASE = {"all_reduce": 0.27, "all_gather": 0.21, "reduce_scatter": 0.15, "broadcast": 0.99, "all_to_all": 0.62}


def _record(effs: dict[str, float], busbw: float = 0.05) -> dict:
    lab = {"backend": "gloo", "dtype": "float", "ranks": "8", **WINDOW}
    metrics = [{"name": "comm_busbw_avg", "value": busbw, "unit": "GB/s", "labels": {"op": op, **lab}} for op in effs]
    metrics += [{"name": "comm_efficiency", "value": v, "unit": "1", "labels": {"op": op, **lab}}
                for op, v in effs.items()]
    return {"schema": "trainready.report/1", "results": [{"name": "comm", "status": "warn", "message": "m",
                                                          "metrics": metrics}]}


def _tables(effs: dict[str, float]) -> list[OpTable]:
    return [OpTable(op, "float", [{"size": 1 << 20, "bytes": 1 << 20, "wrong": 0, "busbw_gbps": 0.05}], 0.05,
                    256 << 10, 0, 1 << 20, e) for op, e in effs.items()]


def test_row_efficiency_is_the_median_ratio_of_paired_loops() -> None:
    # all_reduce at 8 ranks: busbw = S/t x 2(n-1)/n = 1.75 S/t; the ring exchange: busbw = S/t (factor 1).
    entry = {"bytes": 1 << 20, "ref": {"ring_bytes": 1 << 20, "op_s": [0.020, 0.030, 0.050],
                                       "ring_s": [0.010, 0.012, 0.010]}}
    out = row_efficiency("all_reduce", entry, 8)
    # per pair: 1.75 x t_ring / t_op = 0.875, 0.7, 0.35; the median is 0.7 (not the mean 0.64, not the best)
    assert out["efficiency"] == pytest.approx(0.7)
    assert out["ring_busbw_gbps"] == pytest.approx((1 << 20) / 0.010 / 1e9)  # the best ring loop
    assert row_efficiency("all_reduce", {"bytes": 1 << 20}, 8) == {}  # no reference measured: no figure


def test_efficiency_floor_catches_a_20_percent_slow_collective_and_passes_every_reference_run() -> None:
    d = derive({}, [_record({op: BASE[op] * x for op, x in zip(FIVE, run)}) for run in RUNS])
    c = d.spec.comm
    assert set(c.expected_efficiency) == {f"{op}@8" for op in FIVE}
    frac = c.min_fraction_efficiency
    assert frac is not None and 0.85 < frac < 0.95, frac  # 8% gloo margin below the low run (not gloo's 25%)
    floor = next(f for f in d.floors if "efficiency" in f.key)
    assert floor.catches_slowdown and "6 run(s)" in floor.describe() and "floor = 0.92 x low" in floor.describe()
    # the absolute busbw floors on gloo allow the host's drift: none of them can catch 20% (said so)
    assert c.min_fraction_by_op and all(f <= 0.75 for f in c.min_fraction_by_op.values())

    def judge(effs: dict[str, float]):  # type: ignore[no-untyped-def]
        return judge_efficiency(_tables(effs), 8, "gloo", c.expected_efficiency, frac, "spec")

    slow = judge({op: BASE[op] / SLOW_PROBE for op in FIVE})  # every collective 20% slower: the mismatch first
    assert slow.status == Status.FAIL and "comm.min_fraction_efficiency" in slow.message
    assert slow.metrics[0].name == "comm_efficiency_ratio_geomean" and slow.metrics[0].threshold is not None
    for run in RUNS:  # every reference run passes its own floor
        assert judge({op: BASE[op] * x for op, x in zip(FIVE, run)}).status == Status.PASS
    assert judge({"all_reduce": 0.27}).status == Status.SKIP  # a mean over ops needs two
    assert judge_efficiency(_tables(BASE), 8, "gloo", c.expected_efficiency, None, "spec") is None


def test_efficiency_keys_round_trip_and_bad_values_are_one_line_errors(tmp_path) -> None:
    from trainready.errors import ConfigError

    d = derive({}, [_record({op: BASE[op] * x for op, x in zip(FIVE, run)}) for run in RUNS])
    p = tmp_path / "s.toml"
    p.write_text(dump_toml(d.spec))
    back = load_spec(str(p))[0].comm
    assert back.expected_efficiency == d.spec.comm.expected_efficiency
    assert back.min_fraction_efficiency == d.spec.comm.min_fraction_efficiency
    for text, words in [("[comm]\nmin_fraction_efficiency = 0.9\n", "expected comm.expected_efficiency too"),
                        ("[comm]\nmin_fraction_efficiency = 3\nexpected_efficiency = { all_reduce = 0.2 }\n",
                         "expected 0 < x <= 2"),
                        ("[comm]\nexpected_efficiency = { all_reduce = 0 }\n", "expected a ratio > 0"),
                        ("[comm]\nexpected_efficiency = { allreduce = 0.2 }\n", "comm.expected_efficiency.allreduce")]:
        p.write_text(text)
        with pytest.raises(ConfigError, match=words):
            load_spec(str(p))
    old = derive({}, [{"schema": "trainready.report/1", "results": [{"name": "comm", "status": "warn", "message": "m",
                       "metrics": [m for m in _record(BASE)["results"][0]["metrics"] if m["name"] != "comm_efficiency"]}]}])
    assert old.spec.comm.min_fraction_efficiency is None and old.spec.comm.expected_efficiency == {}  # older records


@pytest.mark.slow
def test_a_slow_collective_fails_efficiency_end_to_end_on_gloo() -> None:
    from trainready.comm.run import CommOptions, outcomes, sweep_local, tables
    from trainready.spec.model import CommSpec, NodeSpec

    opts = CommOptions(ops=["all_reduce", "all_gather", "broadcast", "sendrecv"], sizes=[1 << 18, 1 << 20],
                       warmup=1, iters=3, world_size=4, backend="gloo", step_budget_s=0.25, loops=1, eff_loops=4,
                       eff_min_loop_s=0.02, cpu_bind=True,
                       pair_iters=0, deadline_s=300)
    base, _ = sweep_local(opts)
    assert base.ok, base.describe()
    effs = {t.op: t.efficiency for t in tables(base.values[0], opts)}
    assert statistics.fmean(1 for op in ("all_reduce", "all_gather", "broadcast") if effs[op] > 0) == 1
    assert effs["sendrecv"] != effs["sendrecv"]  # nan: sendrecv is the reference itself, never its own ratio
    spec = NodeSpec(comm=CommSpec(expected_efficiency={f"{op}@4": e for op, e in effs.items() if e == e},
                                  min_fraction_efficiency=0.8))
    planted, _ = sweep_local(dataclasses.replace(opts, faults={"slow_pct": 150.0}))  # ratio -> 1/2.5 of itself
    assert planted.ok, planted.describe()
    slow = {name: o for name, _, o in outcomes(planted.values[0], opts, spec, "spec")}["comm.efficiency"]
    assert slow.status == Status.FAIL and "efficiency at" in slow.message, slow.message  # the mismatch first
    same = {name: o for name, _, o in outcomes(base.values[0], opts, spec, "spec")}["comm.efficiency"]
    assert same.status == Status.PASS and same.metrics[0].value == pytest.approx(1.0)


def test_gloo_ranks_are_pinned_the_same_way_on_every_launch() -> None:
    import os
    import subprocess
    import sys

    cores = sorted(os.sched_getaffinity(0))
    code = ("import os, sys; from trainready.comm.rankenv import bind_cpus; "
            "print(bind_cpus(int(sys.argv[1]), int(sys.argv[2]))); print(sorted(os.sched_getaffinity(0)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def bound(rank: int, world: int) -> tuple[str, str]:
        out = subprocess.run([sys.executable, "-c", code, str(rank), str(world)], capture_output=True, text=True,
                             env=env, check=True).stdout.splitlines()
        return out[0], out[1]

    rule, mine = bound(len(cores) + 1, max(8, len(cores) + 2))  # more ranks than cores: round-robin
    assert mine == str([cores[1 % len(cores)]]) and rule.startswith(f"rank r on core r mod {len(cores)}")
    rule, mine = bound(0, 1)  # one rank: every core (one block of them; round-robin on a 1-core machine)
    assert mine == str(cores) and (f"{len(cores)} cores per rank" in rule or len(cores) == 1)


def test_the_all_ops_rows_of_the_verdict_table_take_no_time_of_their_own() -> None:
    # `trainready comm` shows each row's own time; a mean over the ops has no step of its own
    from trainready.comm.run import _own_seconds

    d = derive({}, [_record({op: BASE[op] * x for op, x in zip(FIVE, run)}) for run in RUNS])
    c = d.spec.comm
    eff = judge_efficiency(_tables(BASE), 8, "gloo", c.expected_efficiency, c.min_fraction_efficiency, "spec")
    assert eff is not None and _own_seconds("comm.efficiency", eff, {}, 9.0) == 0.0
