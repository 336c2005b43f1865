"""NVLink per GPU, the NVSwitch fabric and its services, GPUDirect RDMA, and the rails, against [fabric].

NVLink: active links against fabric.nvlink_per_gpu (18 on H100/H200 SXM and B200, NVIDIA's product
briefs), or against the node's other GPUs when the spec says nothing; the generation; what each link reaches.
NVSwitch (fabric.nvswitch): every GPU registered with the fabric (NVML fabric state completed, status success),
all in one clique. A GPU without NVLink (NVML: Not Supported) is "not applicable" unless the spec expects links.
"""

from __future__ import annotations

from trainready.fabric.facts import FabricFacts
from trainready.fabric.judge.findings import Findings, names
from trainready.fabric.nvlink import GpuFabric
from trainready.spec.fabric import FabricSpec


def judge_nvlink(out: Findings, facts: FabricFacts, spec: FabricSpec) -> None:
    want = spec.nvlink_per_gpu
    if facts.nvml is not None:
        if want:
            out.fail("nvlink", f"NVLink not read ({facts.nvml}), expected {want} active links per GPU (fabric.nvlink_per_gpu)")
        else:
            out.info("nvlink", f"NVLink not applicable: no GPU read ({facts.nvml})")
        return
    linked = [g for g in facts.gpus if g.not_applicable is None]
    for g in facts.gpus:
        if g.not_applicable is not None:
            if want:
                out.fail("nvlink", f"GPU {g.index}: no NVLink ({g.not_applicable}), expected {want} active links (fabric.nvlink_per_gpu)")
            continue
        _links(out, g, want, max((x.active for x in linked), default=0), spec)
    na = [g for g in facts.gpus if g.not_applicable is not None]
    if na and not want:
        out.info("nvlink", f"NVLink not applicable on GPU {names([str(g.index) for g in na])}: {na[0].not_applicable}")
    if linked:
        counts = sorted({g.active for g in linked})
        out.info("nvlink", f"{len(linked)} GPU(s) with NVLink, {'/'.join(map(str, counts))} active link(s) each")


def _links(out: Findings, g: GpuFabric, want: int | None, best: int, spec: FabricSpec) -> None:
    down = [str(lk.link) for lk in g.links if not lk.active]
    if want is not None and g.active < want:
        out.fail("nvlink", f"GPU {g.index}: {g.active} of {want} NVLinks active (inactive: link {names(down)}), "
                 f"expected {want} (fabric.nvlink_per_gpu)")
    elif want is None and g.active < best:
        out.fail("nvlink", f"GPU {g.index}: {g.active} NVLinks active (inactive: link {names(down)}), the node's "
                 f"other GPUs have {best}")
    if spec.nvlink_version is not None:
        other = [f"link {lk.link} v{lk.version}" for lk in g.links if lk.active and lk.version != spec.nvlink_version]
        if other:
            out.fail("nvlink", f"GPU {g.index}: {names(other)}, expected NVLink {spec.nvlink_version} (fabric.nvlink_version)")
    if spec.nvswitch:
        odd = [f"link {lk.link} → {lk.remote}" for lk in g.links if lk.active and lk.remote not in ("NVSwitch", None)]
        if odd:
            out.fail("nvswitch", f"GPU {g.index}: {names(odd)}, expected every link to reach an NVSwitch (fabric.nvswitch)")


def judge_nvswitch(out: Findings, facts: FabricFacts, spec: FabricSpec) -> None:
    for g in facts.gpus:
        where = (f"fabric state {g.fabric_state}, status {g.fabric_status}, clique {g.clique}" if g.fabric_state
                 else f"no fabric info ({g.fabric_reason})")
        if spec.nvswitch and (g.fabric_state != "completed" or g.fabric_status != "success"):
            out.fail("nvswitch", f"GPU {g.index}: not registered with the NVLink fabric ({where}), expected state "
                     "completed, status success (fabric.nvswitch: Fabric Manager registers each GPU)")
    cliques = sorted({g.clique for g in facts.gpus if g.fabric_state == "completed" and g.clique is not None})
    if spec.nvswitch and len(cliques) > 1:
        by = {c: [str(g.index) for g in facts.gpus if g.clique == c] for c in cliques}
        out.fail("nvswitch", "GPUs in " + str(len(cliques)) + " NVLink cliques (" +
                 "; ".join(f"clique {c}: GPU {names(v)}" for c, v in by.items()) + "), expected one (fabric.nvswitch)")
    elif cliques:
        out.info("nvswitch", f"{len(facts.gpus)} GPU(s) registered with the NVLink fabric, clique {cliques[0]}")


def required(facts: FabricFacts, spec: FabricSpec) -> dict[str, str]:
    """unit → why it must run: the spec's services, else what the GPUs show: an NVLink reaching an NVSwitch
    needs Fabric Manager, and at NVLink 5 (Blackwell) the NVLink Subnet Manager (Fabric Manager User Guide)."""
    if spec.services:
        return {u: "the spec requires it (fabric.services)" for u in spec.services}
    links = [lk for g in facts.gpus for lk in g.links if lk.active and lk.remote == "NVSwitch"]
    out = {"nvidia-fabricmanager": "its GPUs' NVLinks reach NVSwitches"} if links else {}
    if any((lk.version or 0) >= 5 for lk in links):
        out["nvlsm"] = "its GPUs' NVLink 5 links reach NVSwitches"
    return out


def judge_services(out: Findings, facts: FabricFacts, spec: FabricSpec) -> None:
    need = required(facts, spec)
    for s in facts.services:
        if s.unit not in need:
            continue
        if s.running is False:
            out.fail("service", f"{s.unit} not running ({s.how}), {need[s.unit]}")
        elif s.running is None:
            out.warn("service", f"{s.unit}: cannot tell whether it runs ({s.how}); {need[s.unit]}")
        else:
            out.info("service", f"{s.unit} running ({s.how})")
    gd = facts.gpudirect
    if spec.gpudirect and not gd.ready:
        out.fail("gpudirect", f"GPUDirect RDMA not ready ({gd.text}), expected nvidia_peermem or the DMA-BUF path (fabric.gpudirect)")
    elif facts.gpus and facts.ports:
        out.info("gpudirect", f"GPUDirect RDMA: {gd.text}")


def judge_rails(out: Findings, facts: FabricFacts, spec: FabricSpec) -> None:
    got = {str(r.gpu): r for r in facts.rails}
    for gpu, nic in sorted(spec.rails.items(), key=lambda kv: int(kv[0])):
        r = got.get(gpu)
        if r is None:
            out.fail("rail", f"GPU {gpu}: not seen (no PCI address from NVML or sysfs), expected its nearest NIC {nic} (fabric.rails.{gpu})")
        elif r.nic != nic:
            out.fail("rail", f"GPU {gpu} ({r.gpu_pci}): nearest NIC {r.nic or 'none'} ({r.nic_pci or '-'}, via {r.via}), "
                     f"expected {nic} (fabric.rails.{gpu})")
    mapped = [r for r in facts.rails if r.nic and r.via == "switch"]
    if facts.rails:
        out.info("rail", f"{len(mapped)} of {len(facts.rails)} GPU(s) have a NIC under their PCIe switch")
