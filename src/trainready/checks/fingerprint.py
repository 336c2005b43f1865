"""Question 2, bit for bit: do identical devices compute identical bits?

On every GPU (every gloo rank on a CPU node), in its own process, a fixed battery (fingerprint/ops.py: GEMMs
in every precision the device has, exp, softmax, layer norm, an SDPA forward, a row sum; four input patterns),
hashed in order per chunk, repeated R times.  Devices with the same group key (fingerprint/key.py) must agree
bit for bit: the minority device fails, named by index, PCI bus and serial with the op, pattern and first
differing chunk; one whose repeats differ is intermittent; an answer every device shares is held to float64.
With a reference fingerprint in the spec (`spec init --from-report`), a node of the same key is compared with
it bit for bit too.
"""

from __future__ import annotations

from typing import Any

from trainready.devices.parallel import local_devices
from trainready.devices.world import local_world, usable_cores
from trainready.fingerprint.battery import WORKSPACE
from trainready.fingerprint.judge import MIN_GROUP, Judgment, judge
from trainready.fingerprint.rank import SCHEMA
from trainready.fingerprint.reference import RefResult, against_reference
from trainready.ranks.launch import launch
from trainready.records import Level, Metric, Outcome, Status, Threshold
from trainready.suite.base import Check, CheckContext, register
from trainready.util.listing import first_of

REPEATS = {"quick": 2, "standard": 5}  # R: the battery's runs per device (the burn-in repeats it per window)
REMEDY = ("A device computing other bits than its identical peers: drain it, check `nvidia-smi -q -d "
          "ECC,PAGE_RETIREMENT` and dmesg for Xid 48/63/64/94/95, and run the vendor's field diagnostic "
          "(dcgmi diag -r 3); a wrong answer every device shares points at the software (driver, cuBLAS, image).")


def plants_of(ctx: CheckContext) -> dict[str, Any]:
    """The planted faults as the ranks read them (suite/plants.py: fingerprint.*)."""
    out: dict[str, Any] = {}
    if (v := ctx.fault("fingerprint.bitflip")) is not None:
        rank, _, at = v.partition(":")
        out.update(flip_rank=int(rank), flip_at=at or "gemm-bf16/random-7")
    if (v := ctx.fault("fingerprint.intermittent")) is not None:
        out["intermittent_rank"] = int(v)
    if (v := ctx.fault("fingerprint.drift")) is not None:
        out["drift_rank"] = -2 if v.strip() == "all" else int(v)  # -2: every rank (cluster.drift's node)
    if ctx.fault("fingerprint.shared") is not None:
        out["shared"] = True
    return out


def who(rec: dict[str, Any]) -> str:
    """'GPU 3 (PCI 0000:1B:00.0, serial 1651…)' or 'rank 3' (a CPU rank)."""
    if rec["device"] == "cpu":
        return f"rank {rec['rank']}"
    return f"GPU {rec['index']} (PCI {rec['pci_bus_id']}, serial {rec['serial']})"


def collect(ctx: CheckContext, size: str, repeats: int, timeout_s: float) -> tuple[list[dict[str, Any]], str,
                                                                                 dict[str, float]]:
    """Every device's fingerprint record (one rank each), or ([], why the launch failed); the launch's phases
    (LaunchResult.timing_s)."""
    on_gpu = local_devices(ctx.spec)[0].startswith("cuda")
    world = len(local_devices(ctx.spec)) if on_gpu else local_world(ctx.spec, backend="gloo")[0]
    kwargs = {"size": size, "repeats": repeats, "gpus": on_gpu, "plants": plants_of(ctx), "left_out": {},
              "hash_threads": max(1, usable_cores() // world)}
    res = launch("trainready.fingerprint.rank:fingerprint_rank", world, "gloo", kwargs, timeout_s=timeout_s,
                 env={"CUBLAS_WORKSPACE_CONFIG": WORKSPACE}, threads_per_rank=None if on_gpu else 1)
    if not res.ok:
        return [], f"the battery did not finish on every device: {res.describe()}", res.timing_s
    return list(res.values), "", res.timing_s


def size_of(ctx: CheckContext, on_gpu: bool) -> str:
    if not on_gpu:
        return "cpu"
    return "quick" if ctx.options.level.depth <= Level.QUICK.depth else "standard"


def metrics_of(recs: list[dict[str, Any]], j: Judgment) -> list[Metric]:
    zero = Threshold("==", 0.0, "entries", "identical devices compute identical bits (cuBLAS reproducibility)")
    out = []
    for r in recs:
        lab = {"gpu": r["index"]} if r["device"] != "cpu" else {"rank": r["rank"]}
        out.append(Metric.of("fingerprint_mismatches", j.mismatches.get(who(r), 0), "entries", zero, **lab))
        out.append(Metric.of("fingerprint_max_error_ratio", max((e["ratio"] for e in r["entries"]), default=0.0),
                             "1", None, **lab))
    return out


@register
class FingerprintCheck(Check):
    name = "fingerprint"
    title = "Every device's compute fingerprint agrees bit for bit with its identical peers"
    level = Level.QUICK
    order = 22
    timeout_s = 300.0
    launches_ranks = True

    def run(self, ctx: CheckContext) -> Outcome:
        on_gpu = local_devices(ctx.spec)[0].startswith("cuda")
        size = size_of(ctx, on_gpu)
        repeats = REPEATS["quick" if ctx.options.level.depth <= Level.QUICK.depth else "standard"]
        recs, why, launch_s = collect(ctx, size, repeats, self.timeout_for(ctx))
        if not recs:
            return Outcome(Status.FAIL, why, remedy=REMEDY)
        return outcome_of(ctx.spec, recs, size, repeats, {"launch_s": launch_s})


def failed_for(j: Judgment, ref: RefResult) -> list[str]:
    """What the check failed for, as data the fleet reads (cluster/judge/fingerprints.py `rejudged`)."""
    kinds = [("deviation", j.deviations), ("intermittent", j.intermittent), ("shared", j.shared),
             ("reference", ref.failures)]
    return [k for k, found in kinds if found]


def outcome_of(spec: Any, recs: list[dict[str, Any]], size: str, repeats: int,
               extra: dict[str, Any] | None = None) -> Outcome:
    """The verdict on every device's record: judged together (fingerprint/judge.py), then against the spec's
    reference fingerprint; `extra`: more of the run's details to record beside them."""
    j = judge([(who(r), r) for r in recs])
    ref = against_reference(spec, recs, who)
    details = {"schema": SCHEMA, "devices": recs, "reference": ref.summary, "failed_for": failed_for(j, ref),
               **(extra or {})}
    metrics = tuple(metrics_of(recs, j))
    bad = [d.line() for d in j.deviations] + [i.line() for i in j.intermittent] + \
        [s.line() for s in j.shared] + ref.failures
    left = sorted({k for r in recs for k in r["left_out"]})
    what = f"{len(recs[0]['entries'])} entries ({size} battery, {repeats} repeats) on {len(recs)} device(s)" + \
        (f"; left out: {', '.join(left)}" if left else "")
    if bad:
        return Outcome(Status.FAIL, first_of(bad, 4), metrics, remedy=REMEDY, details=details)
    small = [line for _, line in j.small] if len(j.judged) > 1 else []  # a device alone beside the node's others
    if j.drift or j.unknown or small or ref.warnings:
        return Outcome(Status.WARN, first_of(j.drift + j.unknown + small + ref.warnings, 3) + f" ({what})", metrics,
                       remedy="Configuration drift: make the devices' MIG mode, VBIOS, driver, libraries and settings "
                              "the same (or the spec's reference fingerprint this battery's), then rerun; devices of "
                              "another group key are not compared.", details=details)
    few = len(recs) < MIN_GROUP
    alone = f"; {len(recs)} device(s) of one key, fewer than {MIN_GROUP}: no majority to compare with within " \
        "the node" if few else ""
    notes = ("; " + "; ".join(ref.notes)) if ref.notes else ""
    return Outcome(Status.PASS, f"{what}: identical bits across each key, repeats identical, every answer within "
                   f"its float64 rounding bound{alone}{notes}", metrics, details=details)
