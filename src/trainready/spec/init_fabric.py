"""`spec init`'s [fabric]: the reference server's fabric as its manifest recorded it (`env`'s "fabric" section,
fabric/facts.py), written as what every node is held to: its compute NICs and their rates, link layer, firmware,
NVLinks per GPU and their generation, NVSwitch with the services that ran, the rail map, GPUDirect. A part the
reference did not show whole (a port Down, NICs on different firmware) is not written, and said."""

from __future__ import annotations

from typing import Any, Mapping

from trainready.spec.fabric import FabricSpec


def _one(values: list[Any]) -> Any:
    """The value all agree on, else None."""
    return values[0] if values and all(v == values[0] for v in values) else None


def _selected(port: Mapping[str, Any], hca: str | None) -> bool:
    if not hca or not hca.strip():
        return True
    from trainready.fabric.nccl import parse

    return parse(hca).selects(str(port.get("device")), int(port.get("port", 1)))


def _nics(ports: list[Mapping[str, Any]], hca: str | None, notes: list[str]) -> dict[str, float]:
    used = [p for p in ports if _selected(p, hca)]
    down = sorted({str(p["device"]) for p in used if p.get("state") != "ACTIVE"})
    if down:
        notes.append(f"fabric.nics: {', '.join(down)} not Active on the reference: left out of the compute NICs")
    nics: dict[str, float] = {}
    for p in used:
        if p.get("state") == "ACTIVE" and p.get("rate_gbps"):
            dev = str(p["device"])
            nics[dev] = min(float(p["rate_gbps"]), nics.get(dev, float(p["rate_gbps"])))
    return nics


def _nvlink(gpus: list[Mapping[str, Any]]) -> tuple[int | None, int | None, bool]:
    """(links per GPU, generation, NVSwitch) the reference shows."""
    if not gpus:
        return None, None, False
    if any(g.get("not_applicable") for g in gpus):
        return 0, None, False
    active = [[lk for lk in g.get("links", []) if lk.get("active")] for g in gpus]
    version = _one([lk.get("version") for links in active for lk in links])
    nvswitch = all(g.get("fabric_state") == "completed" for g in gpus) and all(
        lk.get("remote") == "NVSwitch" for links in active for lk in links)
    return min(len(a) for a in active), version, nvswitch


def fabric_spec(manifest: Mapping[str, Any], notes: list[str]) -> FabricSpec:
    facts = manifest.get("fabric")
    if not isinstance(facts, Mapping):
        notes.append("fabric: the reference's manifest has no fabric section (written by an older trainready)")
        return FabricSpec()
    ports = [p for p in facts.get("ports", []) if isinstance(p, Mapping)]
    nics = _nics(ports, (facts.get("nccl") or {}).get("ib_hca"), notes)
    chosen = [p for p in ports if p.get("device") in nics]
    fws = sorted({str(p.get("fw_ver")) for p in chosen if p.get("fw_ver")})
    if len(fws) > 1:
        notes.append(f"fabric.fw_ver: the reference's compute NICs run {', '.join(fws)}: not pinned")
    per_gpu, version, nvswitch = _nvlink([g for g in facts.get("gpus", []) if isinstance(g, Mapping)])
    running = tuple(str(s["unit"]) for s in facts.get("services", []) if isinstance(s, Mapping) and s.get("running"))
    rails = {str(r["gpu"]): str(r["nic"]) for r in facts.get("rails", [])
             if isinstance(r, Mapping) and r.get("via") == "switch" and r.get("nic") in nics}
    gd = facts.get("gpudirect") or {}
    return FabricSpec(nics=nics, link_layer=_one([p.get("link_layer") for p in chosen]) or "",
                      fw_ver=fws[0] if len(fws) == 1 else "", nvlink_per_gpu=per_gpu, nvlink_version=version,
                      nvswitch=nvswitch, services=running if nvswitch else (), rails=rails,
                      gpudirect=bool(nics) and bool(gd.get("peermem") or gd.get("dmabuf")))
