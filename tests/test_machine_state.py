"""A timing knows the machine it was measured on (suite/machine.py): foreign CPU work, steal, other GPU processes;
on a busy machine a FAIL within its own noise is WARN "not judged", and a fault beyond the noise still fails."""

from __future__ import annotations

import subprocess
import sys
import time

from trainready.records import Metric, Outcome, Status
from trainready.suite import machine
from trainready.suite.machine import BEYOND_NOISE, TIMING_ONLY, MachineState, beyond_noise, judged_on

QUIET = MachineState(cores=2, seconds=5.0, foreign_cores=0.05, steal_fraction=0.0, load1=0.3, gpu_others=())
BUSY = MachineState(cores=2, seconds=5.0, foreign_cores=1.9, steal_fraction=0.0, load1=6.2, gpu_others=())


def test_busy_says_why_with_numbers_and_a_quiet_machine_says_nothing() -> None:
    assert BUSY.busy() == "other processes kept 1.9 of 2 CPU cores busy (load average 6.2)"
    assert QUIET.busy() == ""
    stolen = MachineState(2, 5.0, 0.0, 0.25, 0.5, ())
    assert stolen.busy() == "the hypervisor stole 25% of the CPU time"
    shared = MachineState(16, 5.0, 0.0, 0.0, 1.0, (4242,))
    assert shared.busy() == "1 other process(es) on the GPUs (PID 4242)"


def test_a_timing_failure_on_a_busy_machine_is_not_judged_and_every_other_failure_stands() -> None:
    slow = Outcome(Status.FAIL, "busbw 1.2 GB/s < 2.0", (Metric.of("comm_busbw_avg", 1.2, "GB/s", None),),
                   details={TIMING_ONLY: True})
    out = judged_on(slow, BUSY)
    assert out.status == Status.WARN and out.message.startswith("not judged: other processes kept 1.9 of 2 CPU "
                                                                  "cores busy (load average 6.2) while it measured")
    assert "busbw 1.2 GB/s < 2.0" in out.message and out.details["machine"]["foreign_cores"] == 1.9
    assert judged_on(slow, QUIET).status == Status.FAIL  # a quiet machine: the figure is judged
    clear = Outcome(Status.FAIL, "GPU 3 at half speed", details={TIMING_ONLY: True, BEYOND_NOISE: True})
    assert judged_on(clear, BUSY).status == Status.FAIL  # beyond its own noise: a fault on any machine
    wrong = Outcome(Status.FAIL, "3 wrong elements")  # correctness never rests on the machine
    assert judged_on(wrong, BUSY).status == Status.FAIL
    fine = Outcome(Status.PASS, "ok")
    assert judged_on(fine, BUSY).status == Status.PASS and judged_on(fine, BUSY).details["machine"]["busy"]


def test_beyond_noise_is_below_the_floor_every_time_by_more_than_the_repeats_spread() -> None:
    assert not beyond_noise([70.0, 95.0], 100.0)  # 5 below, the repeats 25 apart: a busy host
    assert beyond_noise([50.0, 51.0], 100.0)  # half speed twice
    assert not beyond_noise([50.0, 101.0], 100.0)  # once above the floor
    assert not beyond_noise([], 100.0)


def _foreign_busy_loop() -> int:
    """A busy loop that is not this process tree's (its parent shell exits, so it is reparented): its PID."""
    out = subprocess.run(["sh", "-c", f"'{sys.executable}' -c 'import time\nt=time.time()\nwhile time.time()-t<20: "
                          "pass' >/dev/null 2>&1 & echo $!"], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_a_foreign_busy_loop_is_counted_and_our_own_childrens_cpu_is_not() -> None:
    import os
    import signal

    pid = _foreign_busy_loop()
    try:
        assert pid not in machine.tree_pids()
        start = machine.read()
        time.sleep(1.5)
        state = machine.between(start, machine.read())
    finally:
        os.kill(pid, signal.SIGKILL)
    assert state.foreign_cores >= 0.8, state  # the loop alone keeps a core busy
    start = machine.read()
    child = subprocess.run([sys.executable, "-c", "import time\nt=time.process_time()\n"
                            "while time.process_time()-t<0.6: pass"], check=True)
    end = machine.read()
    assert child.returncode == 0 and (end.ours_ticks - start.ours_ticks) / machine.TICK >= 0.55, (start, end)


def test_a_gpu_at_half_speed_in_both_runs_is_beyond_noise_a_busy_hosts_dip_is_not() -> None:
    from trainready.checks.throughput import GpuFigures, beyond_floors
    from trainready.hardware.gpus import lookup
    from trainready.spec.model import ComputeSpec

    spec, peak = ComputeSpec(gemm_min_fraction=0.6, hbm_min_fraction=0.6), lookup("NVIDIA H100 80GB HBM3")
    assert peak is not None
    ok = [GpuFigures(0, "NVIDIA H100 80GB HBM3", 760.0, 3000.0)]
    half = [GpuFigures(0, "NVIDIA H100 80GB HBM3", 380.0, 1500.0)]
    assert beyond_floors(half, half, peak, spec)
    dip = [GpuFigures(0, "NVIDIA H100 80GB HBM3", 560.0, 3000.0)]  # below 0.6 x 989 once, then near the floor
    near = [GpuFigures(0, "NVIDIA H100 80GB HBM3", 590.0, 3000.0)]
    assert not beyond_floors(dip, near, peak, spec) and not beyond_floors(ok, ok, peak, spec)


def test_a_gpu_process_counts_only_with_a_gpu_device_open_here() -> None:
    """NVML reports host PIDs inside a container: a PID of this namespace is another GPU user only if it holds a
    /dev/nvidia* device (this test process holds none; a PID that does not exist reads as none)."""
    import os

    assert machine._holds_a_gpu(os.getpid()) is False
    assert machine._holds_a_gpu(2 ** 22 + 7) is False
