"""Real gloo sweeps (no mocks): zero wrong on a healthy run; planted wrong, slow and hung ranks."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path

import pytest

from conftest import run_cli
from trainready.suite.base import CheckContext
from trainready.checks.comm import CommSweepCheck
from trainready.comm.evaluate import judge_op, op_table
from trainready.hardware.collectives import OPS, size_steps
from trainready.comm.run import CommOptions, outcomes, sweep_local
from trainready.records import Status
from trainready.spec import load_spec

SPEC, _ = load_spec(None)


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    if "--backend" not in args:
        args = (*args, "--backend", "gloo")  # these tests are about the CPU (gloo) path
    return run_cli("comm", *args, timeout=timeout)


def opts(n: int = 4, ops: list[str] | None = None, timeout_s: float = 20.0, **faults: object) -> CommOptions:
    return CommOptions(ops or list(OPS), size_steps(1024, 16384, 4), warmup=1, iters=2, world_size=n,
                       timeout_s=timeout_s, pair_iters=3, step_budget_s=0.5, faults=dict(faults))


# A planted 150 ms a pairwise exchange makes the pairwise stage several seconds long even on a quiet host (3 passes
# of the matrix, 5 solo rounds): at load average 17-19 on 2 cores it ran past 20 s without a progress report.
SLOW_STAGE_S = 90.0


@pytest.fixture(scope="module")
def healthy() -> dict:  # type: ignore[type-arg]
    res, _ = sweep_local(opts())
    assert res.ok, res.describe()
    return res.values[0]  # type: ignore[no-any-return]


def test_healthy_sweep_has_every_op_and_zero_wrong(healthy: dict) -> None:  # type: ignore[type-arg]
    seen = {(e["op"], e["size"]) for e in healthy["entries"]}
    assert seen == {(op, s) for op in OPS for s in (1024, 4096, 16384)}
    assert all(w == 0 for e in healthy["entries"] for w in e["wrong"])
    assert all(len(e["time_s"]) == 4 and min(e["time_s"]) > 0 for e in healthy["entries"])
    assert len(healthy["pairs"]["matrix"]) == 4


def test_expectation_judges_busbw(healthy: dict) -> None:  # type: ignore[type-arg]
    t = op_table("all_reduce", "float", healthy["entries"], 4, 4096)
    assert judge_op(t, 4, "gloo", {}, 0.8, "s").status == Status.WARN  # no expectation: never invented
    assert "no expectation" in judge_op(t, 4, "gloo", {}, 0.8, "s").message
    assert judge_op(t, 4, "gloo", {"all_reduce": 1e6}, 0.8, "s").status == Status.FAIL
    assert judge_op(t, 4, "gloo", {"all_reduce@4": 1e-9, "all_reduce": 1e6}, 0.8, "s").status == Status.PASS
    one = dict(t.__dict__, rows=[dict(r, busbw_gbps=0.0) for r in t.rows], avg_busbw=0.0)
    o1 = judge_op(type(t)(**one), 1, "nccl", {"all_reduce": 367.0}, 0.8, "s")  # 1 GPU: no bus traffic
    assert o1.status == Status.WARN and "not applied" in o1.message


def test_planted_wrong_rank_is_counted() -> None:
    res, _ = sweep_local(opts(wrong_rank=2))
    assert res.ok, res.describe()
    v = outcomes(res.values[0], opts(), SPEC, "spec")
    by = {name: o for name, _, o in v}
    for op in OPS:
        assert by[f"comm.{op}"].status == Status.FAIL, (op, by[f"comm.{op}"].message)
    # all_reduce: rank 2 adds 1 to every input element, so every element on every rank is wrong.
    for row in by["comm.all_reduce"].details["rows"]:
        assert row["wrong"] == row["count"] * 4
    assert "wrong element" in by["comm.all_gather"].message


@pytest.mark.slow
def test_planted_slow_rank_is_named() -> None:
    res, _ = sweep_local(opts(ops=["all_reduce"], timeout_s=SLOW_STAGE_S, slow_rank=1, slow_ms=150.0))  # >> a loaded 2-core exchange (gloo floor 3x)
    assert res.ok, res.describe()
    o = dict((n, o) for n, _, o in outcomes(res.values[0], opts(ops=["all_reduce"]), SPEC, "spec"))["comm.pairs"]
    assert o.status == Status.FAIL and o.details["slow_ranks"] == [1]
    assert "rank 1 slow" in o.message


def test_planted_slow_link_is_named_after_its_pair_is_measured_alone() -> None:
    res, _ = sweep_local(opts(ops=["all_reduce"], timeout_s=SLOW_STAGE_S, slow_link=(0, 2), slow_ms=150.0))  # >> a loaded exchange: 20 ms was missed once in a full run
    assert res.ok, res.describe()
    o = dict((n, o) for n, _, o in outcomes(res.values[0], opts(ops=["all_reduce"]), SPEC, "spec"))["comm.pairs"]
    assert o.status == Status.FAIL and o.details["slow_links"] == [[0, 2]] and o.details["slow_ranks"] == []
    (probe,) = o.details["probes"]
    assert probe["test"] == [0, 2] and probe["ratio"] > 3.0  # alone too, against a healthy pair
    assert "link 0<->2 slow" in o.message


@pytest.mark.slow
def test_planted_hung_rank_fails_within_timeout_and_is_named() -> None:
    o = CommOptions(["all_reduce", "all_gather"], [1024], warmup=1, iters=2, world_size=4, timeout_s=12.0,
                    faults={"hang_rank": 3, "fault_step": 1})
    t0 = time.monotonic()
    res, _ = sweep_local(o)
    took = time.monotonic() - t0
    assert not res.ok
    assert [x.rank for x in res.outcomes if x.state == "hung"] == [3]
    assert "rank 3 hung at 'all_reduce float 1024 B" in res.describe()
    assert took < 12.0 * 3 + 30  # ends, never hangs: a loose bound (start-up has its own allowance), not a speed test


@pytest.mark.slow
def test_cli_8_ranks_json_record(tmp_path: Path) -> None:
    out = tmp_path / "comm.json"
    p = cli("-b", "1K", "-e", "64K", "-f", "4", "-w", "1", "-n", "2", "--json", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "#       size         count      type   redop    root" in p.stdout
    rec = json.loads(out.read_text())
    assert rec["schema"] == "trainready.report/1" and rec["command"] == "comm"
    res = {r["name"]: r for r in rec["results"]}
    assert set(res) == {f"comm.{op}" for op in OPS} | {"comm.pairs"}
    for op in OPS:
        rows = res[f"comm.{op}"]["details"]["rows"]
        assert [r["size"] for r in rows] == [1024, 4096, 16384, 65536]
        assert all(r["wrong"] == 0 and len(r["time_us_by_rank"]) == 8 for r in rows)
        assert res[f"comm.{op}"]["status"] == "warn"
    assert rec["context"]["options"]["world_size"] == 8
    assert "nccl_env" in rec["context"]["versions"]


@pytest.mark.slow
def test_cli_planted_wrong_fails_and_exits_3() -> None:
    p = cli("-b", "1K", "-e", "1K", "--ops", "all_reduce", "--world-size", "2", "-w", "0", "-n", "1",
            "--plant", "comm.wrong_rank=1", "-q")
    assert p.returncode == 3, p.stderr[-2000:]  # a planted run exits 3 (records.PLANTED_EXIT); the check FAILs
    assert "wrong element" in p.stdout


@pytest.mark.parametrize(
    "args,needle",
    [(["-e", "64Q"], "--max-bytes: '64Q' is not a size"), (["--ops", "gather"], "unknown op 'gather'"),
     (["-b", "1M", "-e", "1K"], "larger than --max-bytes"), (["--dtype", "fp8"], "unknown dtype"),
     (["--plant", "comm.nope=1"], "unknown fault"), (["--timeout", "0"], "--timeout"),
     (["-b", "1K", "-e", "64K", "--avg-from", "1M"], "--avg-from"),
     (["-b", "1K", "-e", "100K", "-f", "4", "--avg-from", "80K"], "--avg-from")],
)
def test_cli_bad_input_exit_2_one_line(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    from trainready.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["comm", *args])  # fails before any rank starts
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def _ctx(tmp_path: Path, faults: dict[str, str], expected: dict[str, float]) -> CheckContext:
    comm = dataclasses.replace(SPEC.comm, world_size=4, expected_busbw_gbps=expected, backend="gloo")
    return CheckContext(dataclasses.replace(SPEC, comm=comm), tmp_path, faults)


@pytest.mark.slow
def test_node_check_passes_when_expectations_met(tmp_path: Path) -> None:
    tiny = {op: 1e-9 for op in OPS}  # met by any working machine: exercises the PASS path
    r = CommSweepCheck().execute(_ctx(tmp_path, {}, tiny))
    assert r.status == Status.PASS, r.message
    assert "zero wrong elements" in r.message


@pytest.mark.slow
def test_node_check_says_why_an_expectation_was_not_applied(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, {}, {op: 1e-9 for op in OPS})
    far = dataclasses.replace(ctx.spec.comm, expected_sizes_bytes=(64 << 20, 128 << 20))  # beyond the node sweep
    r = CommSweepCheck().execute(dataclasses.replace(ctx, spec=dataclasses.replace(ctx.spec, comm=far)))
    assert r.status == Status.WARN
    assert "no busbw expectation" not in r.message and "not judged" in r.message, r.message
    assert "trainready comm -b 64M -e 128M" in r.remedy


@pytest.mark.slow
def test_node_check_fails_on_planted_wrong_rank(tmp_path: Path) -> None:
    r = CommSweepCheck().execute(_ctx(tmp_path, {"comm.wrong_rank": "0"}, {op: 1e-9 for op in OPS}))
    assert r.status == Status.FAIL
    assert "wrong element" in r.message


def test_help_defaults_match_the_code() -> None:
    import inspect

    from trainready.comm.defaults import SWEEP_DEFAULTS
    from trainready.hardware.collectives import human
    from trainready.commands.comm import comm

    helps = {k: p.default.help for k, p in inspect.signature(comm).parameters.items()}
    gpu, cpu = SWEEP_DEFAULTS["nccl"], SWEEP_DEFAULTS["gloo"]
    for param, get in [("min_bytes", lambda d: human(d.comm_sizes.min_bytes)),
                       ("max_bytes", lambda d: human(d.comm_sizes.max_bytes)), ("factor", lambda d: d.comm_sizes.factor),
                       ("step_budget", lambda d: f"{d.step_budget_s:g}"), ("warmup", lambda d: d.warmup),
                       ("iters", lambda d: d.iters), ("pair_bytes", lambda d: human(d.pair_bytes))]:
        assert f"{get(cpu)} on CPU" in helps[param], (param, helps[param])
        assert f"{get(gpu)} on GPUs" in helps[param], (param, helps[param])


def test_each_verdict_row_shows_its_own_time(healthy: dict) -> None:  # type: ignore[type-arg]
    from trainready.comm.run import build_report

    rep = build_report(opts(), SPEC, "spec", healthy, None, 99.0, {})
    took = {r.name: r.duration_s for r in rep.results}
    assert len(set(took.values())) > 1 and all(0 < s < 99.0 for s in took.values()), took  # not the total, each
    mine = sum(e["wall_s"] for e in healthy["entries"] if e["op"] == "all_reduce")
    assert took["comm.all_reduce"] == pytest.approx(mine) and took["comm.pairs"] == healthy["pairs_wall_s"]
    assert sum(took.values()) < 99.0 and rep.duration_s == 99.0  # the whole sweep stays the report's time


def test_planted_slow_collectives_fail_a_floor_from_this_machine(healthy: dict) -> None:  # type: ignore[type-arg]
    o = opts(ops=["all_reduce"])
    t = op_table("all_reduce", "float", healthy["entries"], 4, o.floor)
    spec = dataclasses.replace(SPEC, comm=dataclasses.replace(SPEC.comm, expected_busbw_gbps={"all_reduce@4": t.avg_busbw}))
    res, _ = sweep_local(opts(ops=["all_reduce"], slow_pct=900.0))  # every timed loop 10x longer: far beyond load noise
    assert res.ok, res.describe()
    (v,) = [x for n, _, x in outcomes(res.values[0], o, spec, "spec") if n == "comm.all_reduce"]
    assert v.status == Status.FAIL and "busbw" in v.message, v.message


def test_a_link_slow_in_the_matrix_only_is_cleared_when_its_pair_is_measured_alone() -> None:
    res, _ = sweep_local(opts(ops=["all_reduce"], transient_link=(0, 2), slow_ms=20.0))
    assert res.ok, res.describe()
    o = dict((n, o) for n, _, o in outcomes(res.values[0], opts(ops=["all_reduce"]), SPEC, "spec"))["comm.pairs"]
    assert o.details["nominated"]["links"] == [[0, 2]]  # the matrix saw it: 20 ms per exchange in every pass
    assert o.status == Status.PASS and o.details["slow_links"] == [], o.message
    assert "link 0<->2 was" in o.message and "not a fault" in o.message
