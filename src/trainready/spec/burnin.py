"""The [burnin] section of a spec: how long a burn-in runs and how it is judged (docs/burn-in.md).

Each threshold says where its number comes from.  The healthy reference is one H200 (driver 580.159.04) under
90 s of 8192³ BF16 GEMM sampled at 1 Hz: 701 → 665 TFLOP/s (−5%) as it warmed 36 → 60 °C, the software power
cap (clock-event reason 0x4) set the whole time, 89.8 s of power violation time, no thermal violation
(docs/burn-in.md, "Measured").
"""

from __future__ import annotations

from dataclasses import dataclass

from trainready.errors import ConfigError
from trainready.util.strict import doc_field


@dataclass(frozen=True)
class BurnInSpec:
    duration_s: float = doc_field(
        900.0, "Seconds a burn-in runs when --duration is not given. 900 s = 15 min: the length of DCGM's "
        "`dcgmi diag -r 3` ('long': targeted stress, targeted power, memory bandwidth, GEMM).",
    )
    sample_hz: float = doc_field(
        1.0, "NVML samples per second per GPU (temperature, SM clock, power, clock-event reasons); >= 1.",
    )
    first_s: float = doc_field(
        60.0, "Seconds of each GPU's own first window, the reference of the over-time rule ('its first minute'). "
        "A run shorter than 4 windows uses a quarter of its length.",
    )
    drop_max: float = doc_field(
        0.15, "A GPU whose throughput (median over a window of first_s) falls more than this fraction below its "
        "own first window is named, with when and the slowdown reasons. 0.15: three times the healthy drift "
        "measured on an H200 at its software power cap (701 → 665 TFLOP/s, −5%, over 90 s as it warmed).",
    )
    median_min_fraction: float = doc_field(
        0.90, "Each GPU's sustained figure (median over the run) must reach this fraction of the node's median "
        "GPU. 0.90: the short throughput check's compute.spread_max (0.10); an 8x H200 node measured 741-777 "
        "TFLOP/s over its GPUs (docs/measured-h200.md).",
    )
    gpu_temp_max_c: float | None = doc_field(
        85.0, "Highest GPU temperature allowed, °C. 85: 4 °C under the H200's slowdown threshold (89 °C, NVML "
        "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN): a GPU that close to throttling under a steady load has no cooling "
        "margin left. Omitted = not judged.",
    )
    mem_temp_max_c: float | None = doc_field(
        90.0, "Highest HBM temperature allowed, °C (NVML field NVML_FI_DEV_MEMORY_TEMP). 90: 5 °C under the 95 °C "
        "'Memory Max Operating Temp' nvidia-smi -q reports for H100/H200 SXM. Omitted = not judged.",
    )
    thermal_slowdown_max_fraction: float | None = doc_field(
        0.01, "Largest fraction of the run a GPU may spend in thermal slowdown (clock-event reasons 0x20 SW "
        "thermal or 0x40 HW thermal). 0.01 (9 s of 15 min): the healthy H200 spent 0 s there. Omitted = not judged.",
    )
    hw_slowdown_max_fraction: float | None = doc_field(
        0.01, "Largest fraction of the run a GPU may spend in hardware slowdown (0x8 HW slowdown or 0x80 HW power "
        "brake: the board or its power supply pulled the clock down). 0.01: the healthy H200 spent 0 s there. "
        "The software power cap (0x4) is a GPU at its power limit, expected under full load: recorded, not judged.",
    )
    sampling_cost_max: float = doc_field(
        0.01, "Largest share of the load's throughput the NVML sampling may cost, measured side by side (docs/"
        "burn-in.md); above it the result WARNs (the tool disturbs what it measures).",
    )
    cpu_ranks: int = doc_field(
        2, "gloo ranks of a burn-in on a machine without GPUs: it tests the loop and the judge, not the CPU; "
        "2 is the fewest that run an all_reduce.",
    )


def validate(spec: object, path: str) -> None:
    """Values that load as the right type but cannot be meant: ConfigError naming file + key."""
    b: BurnInSpec = getattr(spec, "burnin")
    checks = [
        ("duration_s", b.duration_s > 0, "seconds > 0"),
        ("sample_hz", b.sample_hz >= 1, "samples per second >= 1"),
        ("first_s", b.first_s > 0, "seconds > 0"),
        ("drop_max", 0 < b.drop_max < 1, "a fraction 0 < x < 1"),
        ("median_min_fraction", 0 < b.median_min_fraction <= 1, "a fraction 0 < x <= 1"),
        ("gpu_temp_max_c", b.gpu_temp_max_c is None or b.gpu_temp_max_c > 0, "°C > 0"),
        ("mem_temp_max_c", b.mem_temp_max_c is None or b.mem_temp_max_c > 0, "°C > 0"),
        ("thermal_slowdown_max_fraction", b.thermal_slowdown_max_fraction is None
         or 0 <= b.thermal_slowdown_max_fraction <= 1, "a fraction 0 <= x <= 1"),
        ("hw_slowdown_max_fraction", b.hw_slowdown_max_fraction is None or 0 <= b.hw_slowdown_max_fraction <= 1,
         "a fraction 0 <= x <= 1"),
        ("sampling_cost_max", 0 < b.sampling_cost_max < 1, "a fraction 0 < x < 1"),
        ("cpu_ranks", b.cpu_ranks >= 1, "an integer >= 1"),
    ]
    for key, ok, expected in checks:
        if not ok:
            raise ConfigError(path, f"burnin.{key}", f"expected {expected}")
