"""All the fabric's rules over one reading, to one outcome: FAIL names each NIC, GPU and link that misses what
was expected; a counter that rose since the run's start WARNs, past its bound FAILs; a node with no RDMA
device and no NVLink, of which the spec expects none, is "not applicable" (SKIP, saying what NVML answered)."""

from __future__ import annotations

from typing import Any

from trainready.fabric.facts import FabricFacts, Snapshot, snapshot
from trainready.fabric.judge.findings import FAIL, INFO, WARN, Findings, rise
from trainready.fabric.judge.gpus import judge_nvlink, judge_nvswitch, judge_rails, judge_services
from trainready.fabric.judge.nccl import judge_nccl, used_ports
from trainready.fabric.judge.ports import judge_ports
from trainready.records import Metric, Outcome, Status, Threshold
from trainready.spec.fabric import FabricSpec

REMEDY = ("Reseat or replace the cable/transceiver of a NIC that is down or trained below its rate (ibstat, "
          "mlxlink -d DEV), name every compute NIC in NCCL_IB_HCA (or unset it), start nvidia-fabricmanager / "
          "nvlsm (systemctl start), and send a GPU whose NVLinks are down or erroring for service; or correct the "
          "spec's [fabric] if the server is meant to differ.")


def _counters(out: Findings, start: Snapshot | None, end: Snapshot, bound: int) -> str:
    if start is None:
        return "counters read once (no reading at the run's start)"
    for name, now in end.ports.items():
        rise(out, "counter", f"NIC {name}", start.ports.get(name, {}), now, bound)
    for name, now in end.links.items():
        rise(out, "counter", name, start.links.get(name, {}), now, bound)
    return f"counters compared over {end.at - start.at:.1f} s"


def _metrics(facts: FabricFacts, spec: FabricSpec) -> list[Metric]:
    out = []
    for p in facts.ports:
        if p.rate_gbps is not None:
            want = spec.nics.get(p.device)
            thr = Threshold(">=", want, "Gb/s", f"fabric.nics.{p.device}") if want else None
            out.append(Metric.of("nic_rate", p.rate_gbps, "Gb/s", thr, nic=p.device, port=p.port))
    for g in facts.gpus:
        if g.not_applicable is None:
            want = spec.nvlink_per_gpu
            thr = Threshold(">=", want, "links", "fabric.nvlink_per_gpu") if want is not None else None
            out.append(Metric.of("nvlink_active", g.active, "links", thr, gpu=g.index))
    return out


def _applicable(facts: FabricFacts, spec: FabricSpec) -> str | None:
    """Why nothing of a fabric is here to judge (SKIP), or None."""
    if facts.ports or spec != FabricSpec() or any(g.not_applicable is None for g in facts.gpus):
        return None
    rdma = f"no RDMA device ({facts.root}/class/infiniband {'empty' if facts.rdma else 'absent'})"
    gpu = (f"no GPU ({facts.nvml})" if facts.nvml else
           f"NVLink not applicable ({facts.gpus[0].not_applicable})" if facts.gpus else "no GPU")
    return f"{rdma}; {gpu}; the spec's [fabric] expects none"


def findings(facts: FabricFacts, spec: FabricSpec, start: Snapshot | None,
             end: Snapshot | None = None) -> tuple[Findings, str]:
    """Every rule's findings, and how the counters were compared (`start`: the run's start, None: not read)."""
    out = Findings()
    compute = judge_ports(out, facts.ports, spec, used_ports(facts.nccl, facts.ports))
    judge_nccl(out, facts.nccl, facts.ports, compute, facts.netdevs_up)
    judge_nvlink(out, facts, spec)
    judge_nvswitch(out, facts, spec)
    judge_services(out, facts, spec)
    judge_rails(out, facts, spec)
    window = _counters(out, start, end or snapshot(facts.ports, facts.gpus), spec.counter_rise_max)
    return out, window


def judge(facts: FabricFacts, spec: FabricSpec, start: Snapshot | None, end: Snapshot | None = None) -> Outcome:
    """One outcome for the node's fabric; `start` the counters at the run's start (None: not read), `end` those
    now (default: from `facts`)."""
    out, window = findings(facts, spec, start, end)
    details: dict[str, Any] = {"facts": facts.to_json(), "findings": [f.__dict__ for f in out.items],
                               "counters": window}
    metrics = tuple(_metrics(facts, spec))
    if fails := out.of(FAIL):
        return Outcome(Status.FAIL, "; ".join(f.text for f in fails), metrics, REMEDY, details)
    if (why := _applicable(facts, spec)) is not None:
        return Outcome(Status.SKIP, why, metrics, details=details)
    if warns := out.of(WARN):
        return Outcome(Status.WARN, "; ".join(f.text for f in warns), metrics, REMEDY, details)
    return Outcome(Status.PASS, "; ".join(f.text for f in out.of(INFO)) + f"; {window}", metrics, details=details)
