"""The burn-in's judge on made-up series and counters: each rule shown failing on a planted case before the
healthy case passes (a slowdown named with when and why, counter growth, temperatures, slowdown time, a GPU
below the node's median, the sampling cost side by side), and NVML read through a fake module."""

from __future__ import annotations

import math

import pytest

from trainready.burnin import counters, nvml, overtime, parse_duration
from trainready.burnin.judge import Inputs, judge
from trainready.burnin.series import Measured
from trainready.errors import UsageError
from trainready.records import Status
from trainready.spec.burnin import BurnInSpec

SPEC = BurnInSpec()
T0 = 1_000_000.0


def _rank(figure: callable, seconds: int = 900) -> list[dict]:
    """One interval per second; figure(t) is its TFLOP/s (GB/s = 10 x it)."""
    return [{"t0": T0 + t, "t": T0 + t + 1, "gemm_tflops": figure(t), "copy_gbps": 10 * figure(t),
             "busbw_gbps": 100.0, "sum_ok": True} for t in range(seconds)]


def _samples(n: int, seconds: int = 900, temp: int = 60, reasons: callable = lambda t, g: 0x4) -> list[dict]:
    """One reading per second per GPU; reasons(t, gpu) is the clock-event mask."""
    return [{"t": T0 + t, "fast": False, "cost_s": 1e-4,
             "gpus": [{"temp_c": temp, "mem_temp_c": 70, "sm_mhz": 1500, "power_w": 690.0, "reasons": reasons(t, g)}
                      for g in range(n)]} for t in range(seconds)]


def _inputs(ranks: dict[int, list[dict]], samples: list[dict], **kw) -> Inputs:
    m = Measured(T0, ranks, {"start": T0, "hz": 1.0, "block_s": 10.0, "amplify": 10}, samples)
    return Inputs([f"GPU {i}" for i in ranks], m, 900.0, **kw)


def test_parse_duration() -> None:
    assert [parse_duration(x) for x in ("15m", "90s", "1h", "1h30m", "900", "2.5m")] == [900, 90, 3600, 5400, 900, 150]
    for bad in ("", "15x", "m", "0s", "-5m", "15 m x"):
        with pytest.raises(UsageError, match="--duration"):
            parse_duration(bad)


def test_a_gpu_that_falls_below_its_first_minute_is_named_with_when_and_why() -> None:
    steady = _rank(lambda t: 700.0)
    hot = _rank(lambda t: 720.0 if t < 360 else 540.0)
    thermal = _samples(4, reasons=lambda t, g: 0x40 if g == 3 and 360 <= t < 572 else 0x4)
    out = judge(_inputs({0: steady, 1: steady, 2: steady, 3: hot}, thermal), SPEC)
    assert out.status == Status.FAIL
    assert "GPU 3: 720 → 540 TFLOP/s after 6 min" in out.message
    assert "hw_thermal_slowdown 212 s" in out.message
    assert "GPU 0" not in out.message
    # the healthy drift measured on an H200 (701 → 665, −5%, as it warmed) is not a finding
    healthy = _rank(lambda t: 701.0 - 36.0 * min(t, 90) / 90)
    ok = judge(_inputs({0: healthy, 1: healthy}, _samples(2)), SPEC)
    assert ok.status == Status.PASS, ok.message
    drop = [m for m in ok.metrics if m.name == "burnin_gemm_drop"]
    assert drop and all(0.03 < m.value < 0.06 and m.ok for m in drop)  # 665 against its first minute's 689


def test_counter_growth_fails_or_warns_and_unreadable_ones_say_why() -> None:
    b = {0: {"ecc_uncorrected": 0, "ecc_corrected": 5, "pcie_replay": 1, "nvlink": "not available: NVML: Not Supported"},
         1: {"ecc_uncorrected": 0, "ecc_corrected": 0, "pcie_replay": 0, "nvlink3_crc_flit": 0}}
    a = {0: {"ecc_uncorrected": 2, "ecc_corrected": 5, "pcie_replay": 1, "nvlink": "not available: NVML: Not Supported"},
         1: {"ecc_uncorrected": 0, "ecc_corrected": 3, "pcie_replay": 0, "nvlink3_crc_flit": 9}}
    v = counters.compare(["GPU 0", "GPU 1"], b, a, ([(1, 79, 120.0)], {0: "registered", 1: "registered"}), 900.0)
    assert v.fails == ["GPU 0: volatile ECC uncorrectable errors 0 → 2 (+2)",
                       "GPU 1: 1 critical XID event(s) during the burn-in (XID 79 after 120 s)"]
    assert v.warns == ["GPU 1: volatile ECC corrected errors 0 → 3 (+3), 12/h",
                       "GPU 1: NVLink link 3 crc flit errors 0 → 9 (+9), 36/h"]
    assert {"gpu": 0, "counter": "nvlink", "not_available": "not available: NVML: Not Supported"} in v.rows
    quiet = counters.compare(["GPU 0"], {0: b[0]}, {0: b[0]}, ([], {0: "not available: NVML: Not Supported"}), 900.0)
    assert not quiet.fails and not quiet.warns
    assert {"gpu": 0, "counter": "xid", "not_available": "not available: NVML: Not Supported"} in quiet.rows


def test_a_planted_counter_counts_from_zero_where_nvml_gives_none() -> None:
    before = {0: {"ecc_uncorrected": "not available: no GPU"}}
    after, xid = counters.planted({0: dict(before[0])}, "0:ecc_uncorrected")
    v = counters.compare(["rank 0 (CPU)"], counters.planted_before(before, "0:ecc_uncorrected"), after, ([], {}), 8)
    assert v.fails == ["rank 0 (CPU): volatile ECC uncorrectable errors 0 → 1 (+1)"] and xid == []
    assert counters.planted({}, "2:xid") == ({}, [2])


def test_temperature_slowdown_time_and_the_node_median() -> None:
    steady = _rank(lambda t: 700.0)
    slow = _rank(lambda t: 600.0)
    hot = _inputs({0: steady, 1: steady, 2: slow}, _samples(3, temp=88, reasons=lambda t, g: 0x80 if g == 0 and t < 30 else 0x4))
    msg = "; ".join(judge(hot, SPEC).details["findings"])  # the message shows the first 4
    assert "GPU 0: temp reached 88 °C > 85 °C (burnin.gpu_temp_max_c)" in msg
    assert "GPU 0: hardware slowdown 30 s > 9 s allowed (burnin.hw_slowdown_max_fraction)" in msg
    assert "GPU 2: sustained 600 TFLOP/s < 0.9 x the node's median 700" in msg
    cool = judge(_inputs({0: steady, 1: steady, 2: steady}, _samples(3)), SPEC)
    assert cool.status == Status.PASS, cool.message
    assert any(m.name == "burnin_temp_max" and m.value == 60 for m in cool.metrics)


def test_sampling_cost_is_the_fast_blocks_difference_over_amplify_minus_one() -> None:
    # blocks of 10 s: odd blocks sample 10x faster; there the load runs 0.9% slower → 0.1% per base rate
    fig = lambda t: 700.0 * (1 - 0.009) if (t // 10) % 2 else 700.0  # noqa: E731
    out = judge(_inputs({0: _rank(fig), 1: _rank(fig)}, _samples(2)), SPEC)
    cost = out.details["sampling"]["cost_fraction"]
    assert math.isclose(cost, 0.001, rel_tol=1e-6) and out.status == Status.PASS
    costly = lambda t: 700.0 * (1 - 0.3) if (t // 10) % 2 else 700.0  # noqa: E731
    warned = judge(_inputs({0: _rank(costly), 1: _rank(costly)}, _samples(2)), SPEC)
    assert warned.status == Status.WARN and "NVML sampling cost the load 3.33%" in warned.message


def test_a_partial_run_is_marked_and_never_a_pass() -> None:
    steady = _rank(lambda t: 700.0, seconds=300)
    out = judge(_inputs({0: steady}, _samples(1, seconds=300), partial="interrupted by SIGINT"), SPEC)
    assert out.status == Status.WARN
    assert out.message.startswith("partial (interrupted by SIGINT after 5:00 of 15:00): ")


def test_time_weighted_median_weighs_a_long_slow_interval() -> None:
    spans = [(0.0, 1.0, 10.0), (1.0, 2.0, 10.0), (2.0, 10.0, 1.0)]
    assert overtime.weighted_median(spans, 0, 10) == 1.0  # counting intervals would say 10


class _NotSupported(Exception):
    def __str__(self) -> str:
        return "Not Supported"


class FakeNvml:
    """A GPU with ECC and remapping but no NVLink and no retired pages (a Hopper in a VM)."""

    NVML_NVLINK_MAX_LINKS = 18

    def nvmlDeviceGetTotalEccErrors(self, h, kind, where):
        return 7 if kind == 0 else 0

    def nvmlDeviceGetRemappedRows(self, h):
        return (0, 0, 0, 0)

    def nvmlDeviceGetRetiredPages(self, h, cause):
        raise _NotSupported()

    nvmlDeviceGetRetiredPagesPendingStatus = nvmlDeviceGetRetiredPages

    def nvmlDeviceGetPcieReplayCounter(self, h):
        return 3

    def nvmlDeviceGetNvLinkState(self, h, link):
        raise _NotSupported()

    def nvmlDeviceGetViolationStatus(self, h, policy):
        return type("V", (), {"violationTime": 89_800_000_000 if policy == 0 else 0})()

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return 63_000_000

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 60

    def nvmlDeviceGetFieldValues(self, h, fields):
        return [type("F", (), {"nvmlReturn": 0, "value": type("U", (), {"uiVal": 71})()})()]

    def nvmlDeviceGetClockInfo(self, h, which):
        return 1485

    def nvmlDeviceGetPowerUsage(self, h):
        return 699_500

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4


def test_nvml_readings_and_not_available_reasons_through_a_fake_module() -> None:
    c = nvml.counters(FakeNvml(), object())
    assert c["ecc_corrected"] == 7 and c["ecc_uncorrected"] == 0 and c["pcie_replay"] == 3
    assert c["remapped_rows_uncorrectable"] == 0 and c["remap_pending"] == 0
    assert c["retired_pages_double_bit"] == "not available: NVML: Not Supported"
    assert c["nvlink"] == "not available: NVML: Not Supported"
    assert c["power_violation_s"] == 89.8 and c["energy_j"] == 63000.0
    assert nvml.sample(FakeNvml(), object()) == {"temp_c": 60, "mem_temp_c": 71, "sm_mhz": 1485, "power_w": 699.5,
                                                 "reasons": 4}


def test_on_a_cpu_a_fall_every_rank_shares_is_the_hosts_load_a_fall_alone_is_the_ranks() -> None:
    import dataclasses

    m = lambda ranks: Measured(T0, ranks, {"start": T0, "hz": 1.0, "block_s": 10.0, "amplify": 10}, [])  # noqa: E731
    spec = dataclasses.replace(SPEC, drop_max=0.9, median_min_fraction=0.1)  # the CPU profile's bounds
    steady = _rank(lambda t: 1.0)
    alone = _rank(lambda t: 1.0 if t < 300 else 0.02)  # a fiftieth of its speed after 5 min: the planted slowdown
    host = _rank(lambda t: 1.0 if t < 300 else 0.08)  # 92% below, as a loaded host took a healthy rank once
    shared = _rank(lambda t: 1.0 if t < 300 else 0.2)  # the other rank lost 80% at the same time
    names = ["rank 0 (CPU)", "rank 1 (CPU)"]
    fault = judge(Inputs(names, m({0: alone, 1: steady}), 900.0), spec)
    assert fault.status == Status.FAIL and "rank 0 (CPU): 1 → 0.02 TFLOP/s" in fault.message
    load = judge(Inputs(names, m({0: host, 1: shared}), 900.0), spec)
    assert load.status == Status.WARN and "the host's load" in load.message, load.message


def test_an_interval_longer_than_the_window_says_a_fall_cannot_be_judged() -> None:
    """Seen on a 2-core VM at load average 8: an 8 s CPU burn-in whose second GEMM interval lasted 10.5 s against
    a 2.8 s window; its first window then held the slow figure and a planted fall could not show.  Said, never
    a silent pass."""
    row = {"copy_gbps": 0.25, "busbw_gbps": 0.1, "sum_ok": True}
    m = Measured(T0, {0: [{"t0": T0, "t": T0 + 1.0, "gemm_tflops": 0.07, **row},
                          {"t0": T0 + 1.0, "t": T0 + 11.5, "gemm_tflops": 0.0012, **row}]},
                 {"start": T0, "hz": 1.0, "block_s": 1.0, "amplify": 10}, [])
    out = judge(Inputs(["rank 0 (CPU)"], m, 8.0), SPEC)
    assert out.status == Status.WARN, out.message
    assert "rank 0 (CPU): burnin_gemm: one interval lasted 10.5 s, longer than the" in out.message
    assert "a fall cannot be judged" in out.message
    steady = judge(_inputs({0: _rank(lambda t: 700.0), 1: _rank(lambda t: 700.0)}, _samples(2)), SPEC)
    assert steady.status == Status.PASS and "cannot be judged" not in steady.message, steady.message


def test_a_fail_still_says_what_could_not_be_judged() -> None:
    """Seen at load average 9 on 2 cores: an 8 s CPU burn-in with a planted counter (a FAIL) and a planted slowdown
    whose GEMM interval lasted 25.7 s; the message named the counter alone and the unjudged slowdown was only in
    the record's details.  A FAIL's message says both, the failure first."""
    row = {"copy_gbps": 0.25, "busbw_gbps": 0.1, "sum_ok": True}
    slow = [{"t0": T0, "t": T0 + 1.0, "gemm_tflops": 0.07, **row}, {"t0": T0 + 1.0, "t": T0 + 26.7, "gemm_tflops": 0.0012, **row}]
    m = Measured(T0, {0: slow, 1: [dict(x) for x in slow]},  # both ranks alike: neither below the node's median
                 {"start": T0, "hz": 1.0, "block_s": 1.0, "amplify": 10}, [])
    names = ["rank 0 (CPU)", "rank 1 (CPU)"]
    grew = judge(Inputs(names, m, 8.0, before={1: {"ecc_uncorrected": 0}}, after={1: {"ecc_uncorrected": 1}}), SPEC)
    assert grew.status == Status.FAIL, grew.message
    assert grew.message.startswith("rank 1 (CPU): volatile ECC uncorrectable errors 0 → 1 (+1); also: "), grew.message
    assert "rank 0 (CPU): burnin_gemm: one interval lasted 25.7 s" in grew.message and "a fall cannot be judged" in grew.message
    clean = judge(Inputs(names, m, 8.0, before={1: {"ecc_uncorrected": 0}}, after={1: {"ecc_uncorrected": 0}}), SPEC)
    assert clean.status == Status.WARN and "also:" not in clean.message, clean.message


def test_a_fall_over_time_alone_is_a_timing_failure_beyond_noise_only_past_twice_its_bound() -> None:
    """The burn-in marks what its FAIL rests on (suite/machine.py: on a busy host a timing within its noise is
    not judged): a fall over time or against the median alone is timing; past twice its bound it is beyond noise
    (a GPU at half speed); a counter that grew is a fact, never timing."""
    from trainready.records import BEYOND_NOISE, TIMING_ONLY

    steady = _rank(lambda t: 700.0)
    dip = _rank(lambda t: 700.0 if t < 360 else 600.0)  # 14% below its first window: past drop_max, not twice it
    out = judge(_inputs({0: steady, 1: steady, 2: dip}, _samples(3)), SPEC)
    assert out.status == Status.FAIL and out.details[TIMING_ONLY] and not out.details[BEYOND_NOISE], out.details
    half = _rank(lambda t: 700.0 if t < 360 else 350.0)
    out = judge(_inputs({0: steady, 1: steady, 2: half}, _samples(3)), SPEC)
    assert out.status == Status.FAIL and out.details[TIMING_ONLY] and out.details[BEYOND_NOISE], out.details
    hot = judge(_inputs({0: steady, 1: steady}, _samples(2, temp=88)), SPEC)
    assert hot.status == Status.FAIL and not hot.details[TIMING_ONLY], hot.message
