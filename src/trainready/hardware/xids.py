"""NVIDIA XIDs: what each common one means and what to do, for the RMA folder's XID timeline.

Source: NVIDIA's XID catalogue, docs.nvidia.com/deploy/xid-errors (the "Xid Catalog" for Ampere and newer and
its resolution buckets: RESTART_APP, RESET_GPU, RESTART_BM (reboot the node), CONTACT_SUPPORT, ...).  The
meaning is NVIDIA's, shortened; the action is the bucket's, in words.  An XID not in the table is said as
such with the catalogue's address: the driver's own text on the line still says what it is.
"""

from __future__ import annotations

from dataclasses import dataclass

CATALOGUE = "https://docs.nvidia.com/deploy/xid-errors/"


@dataclass(frozen=True)
class XidInfo:
    code: int
    meaning: str
    action: str
    hardware: bool  # points at the GPU or board (RMA evidence), not at the program that ran on it


_APP = "the program's own fault in most cases: restart the application; the GPU needs service only if it repeats " \
       "with other programs"
_RESET = "reset the GPU (nvidia-smi -r, or reboot the node); if it comes back after the reset, contact support / RMA"
XIDS: dict[int, XidInfo] = {x.code: x for x in (
    XidInfo(13, "graphics engine exception (an illegal instruction or address in a kernel)", _APP, False),
    XidInfo(31, "GPU memory page fault (MMU fault: an illegal address)", _APP, False),
    XidInfo(43, "GPU stopped processing (a channel reset after a program's fault)", _APP, False),
    XidInfo(45, "preemptive cleanup after earlier errors (the process was killed or a prior XID)",
            "none by itself: read the XIDs logged just before it", False),
    XidInfo(48, "double-bit ECC error (DBE) in GPU memory", _RESET + "; check the remapped rows", True),
    XidInfo(61, "internal micro-controller breakpoint or warning (PMU)", _RESET, True),
    XidInfo(62, "internal micro-controller halt (PMU)", _RESET, True),
    XidInfo(63, "ECC page retirement or row remapping recorded (a row marked for remapping)",
            "reset the GPU so the remap takes effect; watch the count of remapped rows", True),
    XidInfo(64, "ECC page retirement or row remapping failed to record", "contact support / RMA: the board cannot "
            "retire more memory (run dcgmi diag -r 3 first)", True),
    XidInfo(74, "NVLink error", "reset the GPU / reboot the node; check the NVLink and NVSwitch state "
            "(nvidia-smi nvlink -s); if it repeats on one link, contact support / RMA", True),
    XidInfo(79, "GPU has fallen off the bus (no longer answers on PCIe)", "reboot the node; check the PCIe slot, "
            "power and cooling; if it repeats, contact support / RMA", True),
    XidInfo(92, "high single-bit ECC error rate", "watch it; run dcgmi diag -r 3; contact support if it persists",
            True),
    XidInfo(94, "contained ECC error (only the programs using that memory were stopped)",
            "reset the GPU to remap the row; the node is usable after the reset", True),
    XidInfo(95, "uncontained ECC error (every program on the GPU was affected)", _RESET, True),
    XidInfo(119, "GSP RPC timeout (the GPU System Processor did not answer the driver)",
            "reset the GPU / reboot the node; update the driver; contact support if it repeats", True),
    XidInfo(120, "GSP error (the GPU System Processor reported an error)",
            "reset the GPU / reboot the node; update the driver; contact support if it repeats", True),
    XidInfo(154, "GPU recovery action changed (the driver names what the GPU now needs: a reset, a reboot, or a "
            "drain and reset)", "do what the line names (GPU reset, node reboot); then re-accept the node", True),
)}


def explain(code: int) -> XidInfo:
    """The table's row, or one that says the XID is not in it and where to look."""
    return XIDS.get(code) or XidInfo(code, f"not in trainready's table: see {CATALOGUE} (the driver's text "
                                           "on the line says what it is)", "look it up in the catalogue", True)
