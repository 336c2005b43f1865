"""Known GPUs and their datasheet peaks, so a measured figure can be put as a
fraction of what the part can do (nanochat's `get_peak_flops` idea).

Figures are per GPU, from NVIDIA's public datasheets (named in `source`):
- `bf16_tflops`: dense BF16 tensor-core TFLOP/s (1e12 FLOP/s).  Datasheets print
  the 2:4-sparsity figure with an asterisk; dense is half of it.
- `hbm_gbps`: memory bandwidth in GB/s (1e9 B/s) as printed ("4.8 TB/s" -> 4800).
- `memory_gb`: memory capacity as printed on the datasheet ("141 GB").
- `nvml_memory_gib`: total memory NVML reports (GiB = 2^30 B) where it is known
  from real parts; None where we have not seen one.  The usable figure for a
  memory plan is this, or a conservative conversion of the datasheet figure.

Rows are tried in order and the first whose pattern matches the NVML/torch
product name wins, so the most specific names come first ("H100 NVL" before
"H100", "GB200" before "B200", "A100" before "A10").  Patterns are regular
expressions with word boundaries: "A10" does not match "A100" or "A10G",
"H20" does not match "H200".
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuPeak:
    key: str  # short name, e.g. "H200"
    pattern: str  # regex searched (case-insensitive) in the product name
    bf16_tflops: float  # dense BF16 tensor TFLOP/s, 1e12 FLOP/s
    hbm_gbps: float  # memory bandwidth, 1e9 B/s
    memory_gb: float  # capacity as printed on the datasheet
    nvml_memory_gib: float | None  # total as NVML reports it (GiB), if known
    source: str  # datasheet the row comes from

    def matches(self, product_name: str) -> bool:
        return re.search(self.pattern, product_name, flags=re.IGNORECASE) is not None


def _row(key: str, pattern: str, bf16: float, hbm: float, mem: float, nvml: float | None, src: str) -> GpuPeak:
    return GpuPeak(key, pattern, bf16, hbm, mem, nvml, src)


# Dense BF16 = datasheet sparse figure / 2.  Hopper SXM: 989.4 TF dense = 528 tensor cores x 1,024 FLOP/clk x
# 1.83 GHz, NVIDIA H100 Tensor Core GPU Architecture whitepaper (989.4 / 1,978.9 sparse; datasheets round the
# sparse figure to 1,979).  NVML totals: H100 SXM 81559 MiB, H200 143771 MiB, B200 183359 MiB, A100 80GB
# 81920 MiB, A100 40GB 40960 MiB.
GPUS: tuple[GpuPeak, ...] = (
    # Blackwell
    _row("GB300", r"\bGB300\b", 2500.0, 8000.0, 288.0, None,
         "NVIDIA GB300 NVL72 datasheet (per GPU: 360 PF sparse FP16/BF16 over 72 GPUs = 5 PF, dense 2.5 PF)"),
    _row("GB200", r"\bGB200\b", 2500.0, 8000.0, 186.0, None,
         "NVIDIA GB200 NVL72 datasheet (per GPU: 360 PF sparse FP16/BF16 over 72 GPUs = 5 PF, dense 2.5 PF)"),
    _row("B300", r"\bB300\b", 2250.0, 8000.0, 288.0, None,
         "NVIDIA HGX B300 datasheet (8 GPUs: 36 PF sparse FP16/BF16 -> 4.5 PF/GPU, dense 2.25 PF)"),
    _row("B200", r"\bB200\b", 2250.0, 8000.0, 180.0, 183359 / 1024,
         "NVIDIA HGX B200 datasheet (8 GPUs: 36 PF sparse FP16/BF16 -> 4.5 PF/GPU, dense 2.25 PF; 8 TB/s HBM3e)"),
    # Hopper
    _row("GH200 144G", r"\bGH200\b.*\b144G", 989.4, 4900.0, 144.0, None,
         "NVIDIA GH200 Grace Hopper Superchip datasheet (144 GB HBM3e variant, 4.9 TB/s; 1,979 TF sparse BF16)"),
    _row("GH200", r"\bGH200\b", 989.4, 4000.0, 96.0, None,
         "NVIDIA GH200 Grace Hopper Superchip datasheet (96 GB HBM3 variant, 4 TB/s; 1,979 TF sparse BF16)"),
    _row("H200 NVL", r"\bH200\b.*\bNVL\b", 835.5, 4800.0, 141.0, None,
         "NVIDIA H200 NVL datasheet (1,671 TF sparse BF16; 4.8 TB/s)"),
    _row("H200", r"\bH200\b", 989.4, 4800.0, 141.0, 143771 / 1024,
         "NVIDIA H200 SXM datasheet (1,979 TF sparse BF16; 4.8 TB/s HBM3e)"),
    _row("H100 NVL", r"\bH100\b.*\bNVL\b", 835.5, 3900.0, 94.0, None,
         "NVIDIA H100 NVL datasheet (1,671 TF sparse BF16 per GPU; 3.9 TB/s)"),
    _row("H100 PCIe", r"\bH100\b.*\bPCIe\b", 756.5, 2000.0, 80.0, None,
         "NVIDIA H100 PCIe datasheet (1,513 TF sparse BF16; 2 TB/s HBM2e)"),
    _row("H100", r"\bH100\b", 989.4, 3350.0, 80.0, 81559 / 1024,
         "NVIDIA H100 SXM5 datasheet (1,979 TF sparse BF16; 3.35 TB/s HBM3)"),
    _row("H800", r"\bH800\b", 989.4, 3350.0, 80.0, None,
         "NVIDIA H800 SXM5 datasheet (same tensor cores as H100 SXM; 3.35 TB/s)"),
    _row("H20", r"\bH20\b", 148.0, 4000.0, 96.0, None,
         "NVIDIA H20 product brief (148 TF dense BF16; 4.0 TB/s HBM3)"),
    # Ampere
    _row("A100 80GB PCIe", r"\bA100\b.*80GB.*PCIe", 312.0, 1935.0, 80.0, 80.0,
         "NVIDIA A100 datasheet (PCIe 80GB: 312 TF dense BF16; 1,935 GB/s HBM2e)"),
    _row("A100 PCIe 40GB", r"\bA100\b.*PCIe", 312.0, 1555.0, 40.0, 40.0,
         "NVIDIA A100 datasheet (PCIe 40GB: 312 TF dense BF16; 1,555 GB/s HBM2)"),
    _row("A100-SXM4-80GB", r"\bA100\b.*80GB", 312.0, 2039.0, 80.0, 80.0,
         "NVIDIA A100 datasheet (SXM4 80GB: 312 TF dense BF16; 2,039 GB/s HBM2e)"),
    _row("A100-SXM4-40GB", r"\bA100\b", 312.0, 1555.0, 40.0, 40.0,
         "NVIDIA A100 datasheet (SXM4 40GB: 312 TF dense BF16; 1,555 GB/s HBM2)"),
    _row("A10", r"\bA10\b", 125.0, 600.0, 24.0, None,
         "NVIDIA A10 datasheet (250 TF sparse BF16; 600 GB/s GDDR6)"),
    # Ada
    _row("L40S", r"\bL40S\b", 362.05, 864.0, 48.0, None,
         "NVIDIA L40S datasheet (733 TF sparse BF16; 864 GB/s GDDR6)"),
    _row("L40", r"\bL40\b", 181.05, 864.0, 48.0, None,
         "NVIDIA L40 datasheet (362 TF sparse BF16; 864 GB/s GDDR6)"),
    _row("L4", r"\bL4\b", 121.0, 300.0, 24.0, None,
         "NVIDIA L4 datasheet (242 TF sparse BF16; 300 GB/s GDDR6)"),
)


def lookup(product_name: str) -> GpuPeak | None:
    """The table row for an NVML/torch product name (e.g. "NVIDIA H200"), or None if unknown."""
    name = product_name.strip()
    if not name:
        return None
    for row in GPUS:
        if row.matches(name):
            return row
    return None


def memory_gib_per_gpu(product_name: str) -> float | None:
    """Memory per GPU in GiB for planning, or None for an unknown GPU.

    NVML's total where known; else the datasheet figure read as 1e9 B and
    converted to GiB (80 GB -> 74.5 GiB), which under- rather than over-states
    what the part holds (HBM parts expose slightly more than that).
    """
    row = lookup(product_name)
    if row is None:
        return None
    if row.nvml_memory_gib is not None:
        return row.nvml_memory_gib
    return row.memory_gb * 1e9 / 2**30
