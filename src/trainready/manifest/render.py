"""The readable summary of a manifest (rich tables, one per section)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainready.manifest import is_unavailable


def _val(v: Any) -> Text:
    if is_unavailable(v):
        return Text(str(v), style="yellow")
    if isinstance(v, dict):
        return Text(", ".join(f"{k}={_plain(x)}" for k, x in v.items()) or "—")
    if isinstance(v, list):
        return Text(", ".join(_plain(x) for x in v) or "—")
    return Text(_plain(v))


def _plain(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_plain(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_plain(x) for x in v) + "]"
    return str(v)


def kv_table(title: str, rows: dict[str, Any]) -> Table:
    t = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    t.add_column("key", style="bold", no_wrap=True)
    t.add_column("value", overflow="fold")
    for k, v in rows.items():
        t.add_row(k, _val(v))
    return t


def _links(v: Any) -> str:
    if is_unavailable(v) or not isinstance(v, list):
        return str(v).replace("unavailable: ", "n/a: ")
    return f"{v.count('active')}/{len(v)} up"


def gpu_table(nvml: dict[str, Any]) -> Table:
    t = Table(title="GPUs (NVML)", title_justify="left")
    for c in ("#", "model", "MiB", "ECC", "unc. vol/agg", "remap pend/fail", "persist", "PCIe gen/width (cur/max)", "NVLink", "clock events", "uuid"):
        t.add_column(c, overflow="fold")
    for g in nvml.get("gpus", []):
        bad = (isinstance(g["ecc_uncorrected_volatile"], int) and g["ecc_uncorrected_volatile"] > 0) or g["remap_pending"] is True or g["remap_failed"] is True
        t.add_row(
            str(g["index"]), str(g["name"]), _plain(g["memory_total_mib"]), _plain(g["ecc_mode"]),
            f"{_plain(g['ecc_uncorrected_volatile'])}/{_plain(g['ecc_uncorrected_aggregate'])}",
            f"{_plain(g['remap_pending'])}/{_plain(g['remap_failed'])}", _plain(g["persistence_mode"]),
            f"{_plain(g['pcie_gen_current'])}/{_plain(g['pcie_gen_max'])} x{_plain(g['pcie_width_current'])}/x{_plain(g['pcie_width_max'])}",
            _links(g["nvlink_links"]), _val(g["throttle_reasons"]), str(g["uuid"]),
            style="bold red" if bad else None,
        )
    return t


def print_summary(m: dict[str, Any], console: Console) -> None:
    host = m["host"]
    if isinstance(host, dict):
        console.print(kv_table("Host", host))
        res = host.get("resolves_to", {})
        if isinstance(res, dict) and res.get("loopback"):
            console.print(Text(
                f"  ! hostname '{host['hostname']}' resolves to a loopback address ({_plain(res['addresses'])}): peers told "
                "to reach this node by name reach themselves (Debian/Ubuntu's default /etc/hosts maps the hostname to 127.0.1.1). Fix /etc/hosts or DNS "
                "before multi-node runs, or set MASTER_ADDR to a routable address.", style="yellow"))
    else:
        console.print(kv_table("Host", {"host": host}))
    gpu = m["gpu"]
    if isinstance(gpu, dict):
        nv = gpu["nvml"]
        console.print(kv_table("GPU driver", {
            "NVML": "ok" if nv["error"] is None else nv["error"], "driver": nv["driver_version"],
            "CUDA driver version": f"{nv['cuda_driver_version']} (the driver's ceiling — what nvidia-smi calls 'CUDA Version'; not the toolkit)"
            if not is_unavailable(nv["cuda_driver_version"]) else nv["cuda_driver_version"],
            "GPUs": nv["count"],
        }))
        if nv["gpus"]:
            console.print(gpu_table(nv))
        tv = gpu["torch"]
        console.print(kv_table("GPUs (torch)", {
            "CUDA usable": tv["available"] if tv["available"] else tv["reason"], "count": tv["count"],
            "CUDA_VISIBLE_DEVICES": tv["cuda_visible_devices"] if tv["cuda_visible_devices"] is not None else "(unset)",
        }))
    else:
        console.print(kv_table("GPU", {"gpu": gpu}))
    console.print(kv_table("Software", m["software"] if isinstance(m["software"], dict) else {"software": m["software"]}))
    console.print(kv_table("Container", m["container"]))
    console.print(kv_table("Code", m["code"]))
    ib = m["infiniband"]
    if isinstance(ib, list) and ib:
        t = Table(title="InfiniBand / RDMA ports", title_justify="left")
        for c in ("device", "port", "state", "phys_state", "rate", "link_layer"):
            t.add_column(c)
        for p in ib:
            t.add_row(*(str(p[c]) for c in ("device", "port", "state", "phys_state", "rate", "link_layer")),
                      style=None if p["state"] == "ACTIVE" else "yellow")
        console.print(t)
    else:
        console.print(kv_table("InfiniBand / RDMA ports", {"ports": ib or "none"}))
    if "fabric" in m:  # manifest/build.py's fabric section (fabric/facts.py)
        from trainready.manifest.render_fabric import print_fabric

        print_fabric(m["fabric"], console)
    hs = m.get("host_settings")
    if isinstance(hs, dict):  # manifest/hostset.py: what the fleet compares node with node
        console.print(kv_table("Host settings (value, then \\[its source])", {
            k: f"{_plain(v.get('value'))}  [{v.get('source')}]" if isinstance(v, dict) else v for k, v in hs.items()}))
    else:
        console.print(kv_table("Host settings", {"host_settings": hs}))
    console.print(kv_table("Environment (secrets redacted)", m["env"] if isinstance(m["env"], dict) and m["env"] else {"env": m["env"] or "none relevant"}))
