"""NVIDIA XIDs from the kernel log, read from /dev/kmsg (one record per read(2), each with its sequence number).

The driver logs every XID as `NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the bus.`
(NVIDIA's XID catalogue: docs.nvidia.com/deploy/xid-errors).  NVML delivers XIDs only to a process that
listens while they happen; a check that runs every few minutes reads the kernel's ring buffer instead, from
the sequence number it stopped at (the kernel's own record numbering: Documentation/ABI/testing/dev-kmsg), as
NHC's dmesg checks do.  The sequence restarts at boot, so the boot id goes with it.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass

KMSG = "/dev/kmsg"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),?\s*(.*)")


@dataclass(frozen=True)
class Xid:
    seq: int  # the kernel's record number
    pci: str  # the GPU's bus id as the driver prints it ("0000:18:00")
    code: int
    text: str  # the rest of the line (pid, name, what the driver says)
    usec: int = -1  # microseconds since boot when the kernel logged it (/dev/kmsg's third field); -1 not known


def boot_id(path: str = BOOT_ID) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def parse_record(record: str) -> tuple[int, Xid | None]:
    """One /dev/kmsg record 'prio,seq,usec,flags;message' → (seq, its XID or None)."""
    head, _, msg = record.partition(";")
    fields = head.split(",")
    seq = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else -1
    m = _XID.search(msg)
    if m is None:
        return seq, None
    usec = int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else -1
    return seq, Xid(seq, m.group(1).lower(), int(m.group(2)), m.group(3).strip()[:160], usec)


def read_xids(after_seq: int, path: str = KMSG) -> tuple[int, list[Xid]] | str:
    """XIDs logged after record `after_seq` (-1: every one still in the ring buffer) and the last record's
    number, or why the log cannot be read (a str)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror}"
    last, xids = after_seq, []
    try:
        while True:
            try:
                raw = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:  # the end of the buffer
                    break
                if exc.errno == errno.EPIPE:  # records overwritten under us: go on from the next
                    continue
                return f"cannot read {path}: {exc.strerror}"
            if not raw:
                break
            seq, xid = parse_record(raw.decode("utf-8", "replace"))
            if seq <= after_seq:
                continue
            last = max(last, seq)
            if xid is not None:
                xids.append(xid)
    finally:
        os.close(fd)
    return last, xids
