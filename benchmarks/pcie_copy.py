"""Pinned host↔device copy bandwidth per GPU, side by side with its PCIe link's rate, as the `pcie` check measures
it (checks/pcie.py: one GPU at a time, 256 MiB copies, best of 3 repeats of 20; the link read through NVML while
the copies run).  The rate is the PCI-SIG table's (hardware/pcie.py): GT/s x lanes x encoding / 8 at the link's
maximum generation and width.

    PYTHONPATH=src python benchmarks/pcie_copy.py [--repeats 3] [--json out.json]

Prints per GPU and run: the link (maximum, and as read under load), its rate in GB/s, H2D and D2H GB/s and each
as a ratio of the rate; then the `pcie` check's verdict on the last run.  On a machine without a GPU it says so
and exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="whole measurements of every GPU (default 3)")
    ap.add_argument("--json", help="write every figure to this file")
    a = ap.parse_args()
    sys.path.insert(0, str(SRC))
    import torch

    from trainready.checks.pcie import measure_all
    from trainready.hardware.pcie import judge, link_rate_gbps
    from trainready.spec.model import HostSpec

    if not torch.cuda.is_available():
        print("no GPU: the host↔device copy over PCIe is GPU-only (nothing measured)")
        return
    rows = []
    print(f"{'run':>3} {'GPU':>3} {'link max':>9} {'under load':>10} {'rate GB/s':>9} {'H2D GB/s':>8} {'ratio':>5} "
          f"{'D2H GB/s':>8} {'ratio':>5}")
    figures = []
    for run in range(a.repeats):
        figures = measure_all(list(range(torch.cuda.device_count())))
        for f in figures:
            rate = link_rate_gbps(f.link.gen_max, f.link.width_max)
            ratio = (lambda x: f"{x / rate:.2f}" if rate else "-")  # noqa: E731
            print(f"{run:>3} {f.gpu:>3} {f.link.text(False):>9} {f.link.text():>10} "
                  f"{rate if rate else float('nan'):>9.1f} {f.h2d_gbps:>8.1f} {ratio(f.h2d_gbps):>5} "
                  f"{f.d2h_gbps:>8.1f} {ratio(f.d2h_gbps):>5}" + (f"  ({f.link.error})" if f.link.error else ""))
            rows.append({"run": run, "gpu": f.gpu, "name": torch.cuda.get_device_name(f.gpu),
                         "link_max": f.link.text(False), "link_under_load": f.link.text(), "rate_gbps": rate,
                         "h2d_gbps": f.h2d_gbps, "d2h_gbps": f.d2h_gbps, "link_error": f.link.error})
    h = HostSpec()
    out = judge(figures, h.pcie_min_fraction, h.pcie_spread_max)
    print(f"pcie check on the last run: {out.status.value.upper()}: {out.message}")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "verdict": out.status.value, "message": out.message}, indent=1))


if __name__ == "__main__":
    main()
