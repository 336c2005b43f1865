"""The RMA folder's INDEX.md: what a vendor's support engineer reads in a minute, most telling first.

The node and why it was drained; each GPU's identity (serial, PCI bus, slot, VBIOS, driver) and counters; the
failed checks and the command that reproduces them; the XID timeline with NVIDIA's meanings; the counter history
per sweep; the jobs since the last pass; the vendor's tools (ran, absent, or how to collect them); every file with
its sha256.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from trainready.bundle.layout import Item
from trainready.cluster.repair.rma.evidence import COUNTERS, Evidence
from trainready.cluster.repair.rma.fabric import fabric_md
from trainready.cluster.repair.rma.tools import ToolRun
from trainready.hardware.xids import CATALOGUE


def _cell(v: Any) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(_cell(c) for c in r) + " |" for r in rows)]


def _head(ev: Evidence, meta: Mapping[str, Any]) -> list[str]:
    r = ev.reason
    out = [f"# RMA evidence: node {ev.node}", "",
           f"Made {meta.get('created_at')} by trainready {meta.get('tool_version')} (`{_cell(meta.get('command', ''))}`)."]
    if ev.planted:
        out += ["", "**PLANTED FAULTS: this folder comes from a test run (" + ", ".join(
            f"{k}={v}" for k, v in ev.planted.items()) + "), not evidence for a vendor.**"]
    if r.get("text"):
        out += ["", f"**Drained** {r.get('date') or ''} by trainready's {r.get('source') or '?'} check, class "
                f"**{r.get('class') or 'not recorded'}**: {_cell(r.get('cause') or r.get('text'))}",
                f"Slurm's reason: `{_cell(r.get('slurm') or r.get('text'))}`"]
    else:
        out += ["", "No drain of this node is in RESULTS/drain-ledger.jsonl: the folder was asked for by hand."]
    out += [f"Evidence: {_cell(ev.record_note)}",
            f"Last pass: {ev.last_pass or 'none recorded'} · jobs on the node from {ev.jobs.since} to {ev.jobs.until}: "
            f"{_cell(ev.jobs.vendor_text())}"]
    return out


def _gpus(ev: Evidence) -> list[str]:
    out = ["", "## GPUs", "", f"Driver: {ev.driver} · from the node's record `{ev.record_path or 'none under RESULTS'}`",
           ""]
    if ev.record is None:
        return out + [f"No record to read the GPUs from: {_cell(ev.record_note)}."]
    if not ev.gpus:
        return out + ["No GPU in the record (NVML read none on the node: the driver line says why)."]
    return out + _table(("GPU", "name", "board serial", "PCI bus", "slot (module)", "VBIOS", *COUNTERS),
                        [(g["index"], g["name"], g["serial"], g["pci_bus_id"], g["module_id"], g["vbios"],
                          *(g[c] for c in COUNTERS)) for g in ev.gpus])


def _failures(ev: Evidence) -> list[str]:
    out = ["", "## What failed", ""]
    if ev.failures:
        out += _table(("check", "status", "class", "what it measured"),
                      [(f["check"], f["status"], f["class"], f["message"]) for f in ev.failures])
    else:
        whose = "No failed check in the record" if ev.record is not None and ev.record_own else \
            "No record of the node from the run that drained it"
        out += [whose + (f"; the drain's reasons: {'; '.join(map(str, ev.reason['why']))}" if ev.reason.get("why") else ".")]
    return out + ["", f"Reproduce on the node: `{ev.reproduce}`"]


def _xids(ev: Evidence) -> list[str]:
    out = ["", "## XID timeline (kernel log)", "", f"Meanings and actions: NVIDIA's XID catalogue, {CATALOGUE}", ""]
    if isinstance(ev.xids, str):
        return out + [ev.xids]
    if not ev.xids:
        return out + ["No XID in the kernel log since boot."]
    return out + _table(("kernel seq", "when (UTC)", "GPU (PCI)", "XID", "meaning", "suggested action", "driver's line"),
                        [(x["seq"], x["when"] or f"{x['since_boot_s']} s after boot", x["pci"], x["xid"], x["meaning"],
                          x["action"], x["line"]) for x in ev.xids])


def _history(ev: Evidence) -> list[str]:
    out = ["", "## Counter history and trend (per sweep)", ""]
    if not ev.history:
        return out + ["No sweep history of the node under RESULTS (RESULTS/sweep/trend/NODE.json)."]
    rows = []
    for h in ev.history:
        for gpu, cs in (h.get("counters") or {"-": {}}).items():
            rows.append((str(h.get("when", ""))[:16], h.get("verdict"), gpu, *(cs.get(c, "-") for c in COUNTERS
                                                                               if c not in ("remap_pending", "remap_failed"))))
    out += _table(("when", "verdict", "GPU", "ECC uncorrected", "remapped rows", "PCIe replays", "XIDs since boot"), rows)
    warns = [f"{str(h.get('when', ''))[:16]}: {w}" for h in ev.history for w in h.get("trend") or []]
    return out + (["", "Trend WARNs:", *(f"* {_cell(w)}" for w in warns)] if warns else [])


def _tools(tools: Sequence[ToolRun], cmds: Sequence[str]) -> list[str]:
    out = ["", "## Vendor tools", "", *(f"* **{t.name}**: {t.said}" + (f" (files: {', '.join(t.files)})" if t.files
                                                                      else "") for t in tools)]
    return out + ["", "To collect the kernel log's XIDs and these tools on the node (Slurm starts no job on a drained "
                  "node: it is resumed inside a maintenance reservation that keeps other jobs off, then drained "
                  "again):", "", "```sh", *cmds, "```"]


def index_md(ev: Evidence, tools: Sequence[ToolRun], items: Sequence[Item], cmds: Sequence[str],
             meta: Mapping[str, Any]) -> str:
    lines = [*_head(ev, meta), *_gpus(ev), *_failures(ev), *fabric_md(ev.record, _table), *_xids(ev), *_history(ev),
             *_tools(tools, cmds),
             "", "## Files", "", "Check them with `trainready bundle --verify THIS_FOLDER` (index.json holds every "
             "sha256; secrets are redacted as in every trainready bundle).", "",
             *_table(("file", "sha256", "what it is"), [(f"`{i.path}`", f"`{i.sha256[:16]}…`", i.what) for i in items])]
    return "\n".join(lines) + "\n"
