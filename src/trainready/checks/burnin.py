"""Burn-in (level burn-in): every GPU under sustained load for minutes, judged over time and by its own error
counters (docs/burn-in.md; the package trainready.burnin does the work).

Order: the GPUs' counters are read, the sampler starts (NVML at >= 1 Hz, in this process), the ranks run the
load (one per GPU with NCCL; `burnin.cpu_ranks` gloo ranks on a CPU), the sampler stops, the counters are read
again and the whole is judged.  Everything measured is written to WORKDIR/burnin as it comes, so an interrupt
(Ctrl-C, Slurm's SIGTERM) still gives a record of the part measured, marked partial (`interrupted`).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any, Callable

from trainready.burnin import clock, nvml, overtime, series
from trainready.fingerprint.battery import WORKSPACE
from trainready.burnin.sampler import Sampler, block_seconds
from trainready.records import Level, Outcome, Status
from trainready.suite.base import Check, CheckContext, register

STARTUP_S = 300.0  # beyond the duration: rank start-up, calibration, NVML reads, the judge (seconds)
END_S = 120.0  # the ranks' own allowance beyond the duration, once all run (the last interval, teardown)
STALL_S = 120.0  # no rank reported an interval for this long: the load is hung (an interval is ~1 s)


def duration(ctx: CheckContext) -> float:
    """--duration, else the spec's burnin.duration_s (seconds)."""
    return float(ctx.options.burnin_s if ctx.options.burnin_s is not None else ctx.spec.burnin.duration_s)


def _slow(ctx: CheckContext) -> tuple[int, float] | None:
    value = ctx.fault("burnin.slow")
    if value is None:
        return None
    idx, _, after = value.partition(":")
    return int(idx), float(after or 0)


def _world(ctx: CheckContext) -> tuple[int, str]:
    from trainready.devices.world import local_world

    world, backend = local_world(ctx.spec)
    return (world, backend) if backend == "nccl" else (min(world, ctx.spec.burnin.cpu_ranks), backend)


def _last_lines(out: Path, world: int) -> list[dict[str, Any]]:
    """Each rank's latest interval (the tail of its file), for the progress line."""
    rows = []
    for r in range(world):
        try:
            with open(out / f"rank{r}.jsonl", "rb") as f:
                f.seek(max(0, f.seek(0, 2) - 4096))
                tail = series.read_lines_text(f.read().decode("utf-8", "replace"))
        except OSError:
            continue
        rows += [x for x in tail[-1:] if "gemm_tflops" in x]
    return rows


def _span(vals: list[float], fmt: str) -> str:
    return format(min(vals), fmt) if min(vals) == max(vals) else f"{min(vals):{fmt}}-{max(vals):{fmt}}"


def _ticker(ctx: CheckContext, out: Path, world: int, dur: float, sampler: list[Sampler]) -> Callable[[float], None]:
    """The sampler's once-a-second call: the progress line (time left, a bar, the current figures)."""
    say, start = ctx.progress, {}

    def tick(now: float) -> None:
        if not start:  # the ranks' start line, once they all ran (read once)
            starts = [x["start"] for r in range(world) for x in series.read_lines(out / f"rank{r}.jsonl")[:1]]
            start.update({"t": min(starts)} if len(starts) == world else {})
        if say is None or not start:
            return
        rows = _last_lines(out, world)
        done = min(1.0, (now - start["t"]) / dur)
        bar = "#" * int(done * 20) + "-" * (20 - int(done * 20))
        text = f"burn-in {clock(dur * (1 - done))} left [{bar}]"
        if rows:
            text += (f" GEMM {_span([x['gemm_tflops'] for x in rows], '.4g')} TFLOP/s,"
                     f" HBM {_span([x['copy_gbps'] for x in rows], '.4g')} GB/s")
        last = sampler[0].last if sampler else None
        temps = [g["temp_c"] for g in (last or {}).get("gpus", []) if isinstance(g.get("temp_c"), int)]
        clocks = [g["sm_mhz"] for g in (last or {}).get("gpus", []) if isinstance(g.get("sm_mhz"), int)]
        if temps and clocks:
            text += f", {_span(temps, 'd')} °C, SM {_span(clocks, 'd')} MHz"
        say(text)

    return tick


@register
class BurnInCheck(Check):
    name = "burnin"
    timing = True
    title = "Burn-in: sustained GEMM, HBM copy and all_reduce; error counters before/after; judged over time"
    level = Level.BURN_IN
    order = 200  # after every short check: a machine that fails them is known before minutes of load
    launches_ranks = True

    def timeout_for(self, ctx: CheckContext) -> float:
        return float(ctx.timeouts.get(self.name, duration(ctx) + STARTUP_S))

    def run(self, ctx: CheckContext) -> Outcome:
        from trainready.burnin.load import plan_for
        from trainready.ranks.launch import launch

        world, backend = _world(ctx)
        gpu, dur = backend == "nccl", duration(ctx)
        out = ctx.workdir / "burnin"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        nv, handles, why = _open(gpu, world)
        before = {i: nvml.counters(nv, h) for i, h in enumerate(handles)}
        xids = nvml.Xids(nv, handles) if nv is not None else None
        watch = xids.status if xids is not None else {i: why for i in range(world)}
        meta = {"world": world, "gpu": gpu, "duration_s": dur, "nvml": why, "before": before, "watch": watch,
                "limits": {i: nvml.limits(nv, h) for i, h in enumerate(handles)}}
        (out / series.BEFORE).write_text(json.dumps(meta), encoding="utf-8")
        box: list[Sampler] = []
        sampler = Sampler(out / series.SAMPLES, ctx.spec.burnin.sample_hz, block_seconds(dur), nv, handles, xids,
                          on_tick=_ticker(ctx, out, world, dur, box))
        box.append(sampler)
        sampler.start()
        try:
            flip = ctx.fault("fingerprint.bitflip")
            plan = plan_for(gpu, dur, str(out), _slow(ctx), overtime.window_s(ctx.spec.burnin.first_s, dur),
                            int(flip.partition(":")[0]) if flip is not None else -1)
            res = launch("trainready.burnin.load:burnin_rank", world, backend, dataclasses.asdict(plan),
                         timeout_s=dur + END_S, stall_s=STALL_S, env={"CUBLAS_WORKSPACE_CONFIG": WORKSPACE})
        finally:
            sampler.stop()
        outcome = finish(ctx, out, "")
        if res.ok and not sampler.error:
            return outcome
        broke = f"the load stopped: {res.describe()}" if not res.ok else f"the sampler stopped: {sampler.error}"
        return dataclasses.replace(outcome, status=Status.FAIL if not res.ok else Status.ERROR,
                                   message=f"{broke}; {outcome.message}")

    @classmethod
    def interrupted(cls, ctx: CheckContext, signame: str) -> Outcome | None:
        """The part measured before the interrupt, judged and marked partial; None when nothing was."""
        out = ctx.workdir / "burnin"
        return finish(ctx, out, f"interrupted by {signame}") if (out / series.BEFORE).is_file() else None


def _open(gpu: bool, world: int) -> tuple[Any, list[Any], str]:
    """(pynvml, handles, '') or (None, [], 'not available: why')."""
    if not gpu:
        return None, [], nvml.na("no GPU here: the load ran on the CPU with gloo")
    opened = nvml.open_nvml(world)
    if isinstance(opened, str):
        return None, [], opened
    return opened[0], opened[1], ""


def finish(ctx: CheckContext, out: Path, partial: str) -> Outcome:
    """Counters after, everything read back, planted faults applied (judge-only), the verdict."""
    from trainready.burnin import counters
    from trainready.burnin.judge import Inputs, judge

    meta = json.loads((out / series.BEFORE).read_text(encoding="utf-8"))
    world, gpu = int(meta["world"]), bool(meta["gpu"])
    nv, handles, _ = _open(gpu, world) if not meta["nvml"] else (None, [], meta["nvml"])
    keyed = lambda d: {int(k): v for k, v in d.items()}  # noqa: E731 - JSON keys are strings
    before = keyed(meta["before"])
    after = {i: nvml.counters(nv, h) for i, h in enumerate(handles)}
    measured = series.read(out, world)
    xids = [(int(g), int(x), row["t"] - measured.start) for row in measured.samples for g, x in row.get("xid", [])]
    plant = ctx.fault("burnin.counter")
    after, planted_xid = counters.planted(after, plant)
    xids += [(i, 79, measured.seconds) for i in planted_xid]  # XID 79: GPU has fallen off the bus
    names = [f"GPU {i}" if gpu else f"rank {i} (CPU)" for i in range(world)]
    inp = Inputs(names, measured, float(meta["duration_s"]), counters.planted_before(before, plant), after, xids,
                 keyed(meta["watch"]), keyed(meta["limits"]), meta["nvml"], partial)
    return judge(inp, ctx.spec.burnin)
