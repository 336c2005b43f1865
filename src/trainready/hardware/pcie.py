"""The GPU's path to the host: PCIe link rates, the link as NVML reads it, and the verdict on host↔device copy
bandwidth (checks/pcie.py measures it).

Link rate per direction = transfer rate (GT/s per lane) x lanes x encoding efficiency / 8 bits per byte.
Transfer rates and encodings are the PCI-SIG base specifications' (PCI Express Base Specification revisions
1.0a-5.0): Gen1 2.5 GT/s and Gen2 5 GT/s with 8b/10b; Gen3 8 GT/s, Gen4 16 GT/s and Gen5 32 GT/s with 128b/130b.
So Gen5 x16 = 32 x 16 x 128/130 / 8 = 63.0 GB/s each way; a copy reaches less (transaction-layer packet headers,
flow control).  Gen6 (64 GT/s, PAM4 with FLIT encoding) is not in the table: its GPUs are measured and compared
with each other, not with a rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from trainready.records import Metric, Outcome, Status, Threshold
from trainready.util.listing import first_of

# generation → (GT/s per lane, encoding efficiency)
LINK_TABLE: dict[int, tuple[float, float]] = {
    1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130), 5: (32.0, 128 / 130)}
TABLE_SOURCE = "PCI Express Base Specification (PCI-SIG): GT/s per lane x lanes x encoding (8b/10b, 128b/130b) / 8"


def link_rate_gbps(gen: int | None, width: int | None) -> float | None:
    """GB/s (1e9 B/s) one way at this generation and width; None when either is unknown or not in the table."""
    if gen not in LINK_TABLE or not width:
        return None
    gts, enc = LINK_TABLE[gen]
    return gts * width * enc / 8


@dataclass(frozen=True)
class Link:
    """A GPU's PCIe link as NVML reports it (None: NVML could not say; `error` says why)."""

    gen: int | None = None  # current generation (read under load: an idle link drops it to save power)
    width: int | None = None  # current lanes
    gen_max: int | None = None  # nvmlDeviceGetMaxPcieLinkGeneration: the most this GPU and this system allow
    width_max: int | None = None  # nvmlDeviceGetMaxPcieLinkWidth
    error: str = ""

    def text(self, current: bool = True) -> str:
        g, w = (self.gen, self.width) if current else (self.gen_max, self.width_max)
        return f"Gen{g if g is not None else '?'} x{w if w is not None else '?'}"

    @property
    def trained_down(self) -> bool:
        return None not in (self.gen, self.width, self.gen_max, self.width_max) and \
            (self.gen < self.gen_max or self.width < self.width_max)  # type: ignore[operator]


def read_link(nvml: Any, handle: Any) -> Link:
    """The link of one GPU (pynvml handle), each query on its own."""
    out: dict[str, Any] = {}
    errors = []
    for key, fn in (("gen", "nvmlDeviceGetCurrPcieLinkGeneration"), ("width", "nvmlDeviceGetCurrPcieLinkWidth"),
                    ("gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"), ("width_max", "nvmlDeviceGetMaxPcieLinkWidth")):
        try:
            out[key] = int(getattr(nvml, fn)(handle))
        except Exception as exc:  # noqa: BLE001 - one unsupported query costs one field
            errors.append(f"{fn}: {str(exc).strip() or type(exc).__name__}")
    return Link(**out, error="; ".join(errors))


@dataclass(frozen=True)
class GpuCopy:
    """One GPU's pinned host↔device copy bandwidth (GB/s, 1e9 B/s), and its link under that load."""

    gpu: int
    h2d_gbps: float
    d2h_gbps: float
    link: Link


def _per_gpu(f: GpuCopy, min_fraction: float | None, metrics: list[Metric], bad: list[str]) -> None:
    rate = link_rate_gbps(f.link.gen_max, f.link.width_max)
    labels = {"gpu": f.gpu, "link_max": f.link.text(False), "link_under_load": f.link.text()}
    for name, value in (("pcie_h2d", f.h2d_gbps), ("pcie_d2h", f.d2h_gbps)):
        metrics.append(Metric.of(name, value, "GB/s", None, **labels))
        if rate is None:
            continue
        thr = Threshold(">=", min_fraction, "1", f"spec host.pcie_min_fraction; rate from {TABLE_SOURCE}") \
            if min_fraction is not None else None
        metrics.append(Metric.of(f"{name}_fraction_of_link", value / rate, "1", thr, rate_gbps=f"{rate:.1f}", **labels))
        if thr is not None and not thr.holds(value / rate):
            bad.append(f"GPU {f.gpu} {name[5:].upper()} {value:.1f} GB/s = {value / rate:.0%} of its "
                       f"{f.link.text(False)} link's {rate:.1f} GB/s < {min_fraction:.0%}")
    if f.link.trained_down:
        bad.append(f"GPU {f.gpu} link at {f.link.text()} under load, below its {f.link.text(False)}: trained down "
                   "(reseat the GPU or riser, check the slot's BIOS setting and AER errors)")


def _spread(figures: Sequence[GpuCopy], spread_max: float | None, metrics: list[Metric], bad: list[str]) -> None:
    for name, vals in (("pcie_h2d", [(f.h2d_gbps, f.gpu) for f in figures]),
                       ("pcie_d2h", [(f.d2h_gbps, f.gpu) for f in figures])):
        if len(vals) < 2:
            continue
        best, worst = max(vals, key=lambda v: (v[0], -v[1])), min(vals)
        spread = (best[0] - worst[0]) / best[0] if best[0] > 0 else float("nan")
        thr = Threshold("<=", spread_max, "1", "spec host.pcie_spread_max: (best − worst) / best") \
            if spread_max is not None else None
        metrics.append(Metric.of(f"{name}_spread", spread, "1", thr, worst_gpu=worst[1], best_gpu=best[1]))
        if thr is not None and not thr.holds(spread):
            bad.append(f"GPU {worst[1]} {name[5:].upper()} {worst[0]:.1f} GB/s is {spread:.0%} below GPU {best[1]}'s "
                       f"{best[0]:.1f} (host.pcie_spread_max {spread_max:.0%})")


def judge(figures: Sequence[GpuCopy], min_fraction: float | None, spread_max: float | None) -> Outcome:
    """Pure: each GPU against its link's rate and its link's state, then the GPUs against each other."""
    metrics: list[Metric] = []
    bad: list[str] = []
    for f in figures:
        _per_gpu(f, min_fraction, metrics, bad)
    _spread(figures, spread_max, metrics, bad)
    unread = [f"GPU {f.gpu}: {f.link.error}" for f in figures if f.link.error]
    h2d, d2h = min(f.h2d_gbps for f in figures), min(f.d2h_gbps for f in figures)
    summary = (f"{len(figures)} GPU(s): pinned H2D ≥ {h2d:.1f} GB/s, D2H ≥ {d2h:.1f} GB/s; links under load: "
               + ", ".join(sorted({f.link.text() for f in figures})))
    if bad:
        return Outcome(Status.FAIL, first_of(bad, 4),
                       tuple(metrics), remedy="A slow or trained-down link: `nvidia-smi -q -d PCIE` (link gen/width, "
                       "replays), `lspci -vv` LnkSta against LnkCap; reseat, move or drain the GPU.")
    if unread:
        return Outcome(Status.WARN, f"{summary}; link not read for " + "; ".join(unread), tuple(metrics))
    return Outcome(Status.PASS, summary, tuple(metrics))
