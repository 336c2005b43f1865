"""Like against like: a busbw expectation is judged over the message sizes where the reference measured it.

On a CPU node the node check's short sweep (1K..1M) reads ~10x lower than `trainready comm` (up to 64M);
a spec written from one must neither fail the other on the same machine nor hold it to a lenient figure.
Sweep data here is hand-made with a known busbw per size (no timing), judged by the real code.
"""

from __future__ import annotations

import dataclasses

from trainready.comm.run import CommOptions, outcomes
from trainready.hardware.collectives import size_steps
from trainready.records import Status
from trainready.spec import default_spec
from trainready.spec.init import spec_from_machine

N = 8


def _busbw(size: int) -> float:
    """GB/s that grows with the message size, like a real sweep: 0.01 GB/s per KiB, capped at 10."""
    return min(10.0, 0.01 * size / 1024)


def _data(sizes: list[int]) -> dict:  # type: ignore[type-arg]
    # all_reduce: busbw = algbw * 2(n-1)/n and algbw = S / t (nccl-tests PERFORMANCE.md) -> t = S * 2(n-1)/n / busbw
    ents = [{"op": "all_reduce", "dtype": "float", "size": s, "bytes": s, "count": s // 4, "iters": 1,
             "time_s": [s * 2 * (N - 1) / N / (_busbw(s) * 1e9)] * N, "wrong": [0] * N} for s in sizes]
    return {"entries": ents, "pairs": None}


def _opts(lo: int, hi: int, factor: int) -> CommOptions:
    return CommOptions(["all_reduce"], size_steps(lo, hi, factor), world_size=N, backend="gloo")


def _verdict(spec, opts: CommOptions):  # type: ignore[no-untyped-def]
    (o,) = [o for name, _, o in outcomes(_data(opts.sizes), opts, spec, "spec") if name == "comm.all_reduce"]
    return o


def _spec_from(opts: CommOptions):  # type: ignore[no-untyped-def]
    """What `spec init --from-report` writes from 5 records of this sweep (the README's several runs: gloo's
    floor is 0.75 x the low figure; from one record it would be 0.5, spec/floors.py)."""
    o = _verdict(default_spec(), opts)
    assert o.status == Status.WARN  # no expectation yet
    report = {"results": [{"status": "warn", "metrics": [m.to_json() for m in o.metrics]}]}
    spec = spec_from_machine({}, [report] * 5, 0.8)
    assert spec.comm.min_fraction_by_op == {"all_reduce@8": 0.75}
    return spec


NODE = _opts(1 << 10, 1 << 20, 4)  # the node check's CPU sweep: averages 128K..1M
COMM = _opts(1 << 10, 1 << 26, 4)  # `trainready comm` on CPU: averages 8M..64M


def test_spec_records_op_at_ranks_and_the_size_window() -> None:
    spec = _spec_from(COMM)
    assert set(spec.comm.expected_busbw_gbps) == {"all_reduce@8"}
    assert spec.comm.expected_sizes_bytes == (1 << 23, 1 << 26)


def test_long_sweep_figure_is_not_held_against_the_short_sweep() -> None:
    spec = _spec_from(COMM)
    # Mismatch first: without the window the node sweep is held to the 64M figure and fails on a healthy machine.
    blind = dataclasses.replace(spec, comm=dataclasses.replace(spec.comm, expected_sizes_bytes=()))
    assert _verdict(blind, NODE).status == Status.FAIL
    # With it: none of the node sweep's sizes lies in 8M..64M, so it says so and does not judge.
    o = _verdict(spec, NODE)
    assert o.status == Status.WARN and "not judged" in o.message and "trainready comm -b 8M -e 64M" in o.remedy
    # The same long sweep passes against its own figure.
    assert _verdict(spec, COMM).status == Status.PASS


def test_short_sweep_figure_judges_the_long_sweep_over_the_same_sizes() -> None:
    spec = _spec_from(NODE)
    assert spec.comm.expected_sizes_bytes == (1 << 17, 1 << 20)
    assert _verdict(spec, COMM).status == Status.PASS  # averaged over 128K..1M of the long sweep: equal figures
    # And a long sweep that is slow in that window fails (the window is judged, not the fast large sizes).
    slow = _data(COMM.sizes)
    for e in slow["entries"]:
        if e["size"] <= 1 << 20:
            e["time_s"] = [t * 2 for t in e["time_s"]]  # half the bandwidth at small sizes
    (o,) = [o for name, _, o in outcomes(slow, COMM, spec, "spec") if name == "comm.all_reduce"]
    assert o.status == Status.FAIL and "128K <= S <= 1M" in o.message
    assert "NVLink" not in o.remedy  # gloo: a CPU remedy, not a GPU one


def test_avg_from_and_a_spec_window_together_is_a_usage_error(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = tmp_path / "fleet.toml"
    spec.write_text('[comm]\nbackend = "gloo"\nexpected_busbw_gbps = { "all_reduce@2" = 1.0 }\n'
                    "expected_sizes_bytes = [8388608, 67108864]\n")
    res = cli("comm", "--spec", str(spec), "--world-size", "2", "--avg-from", "4K")
    assert res.returncode == 2 and "--avg-from 4K: the spec fixes the averaging sizes" in res.stderr, res.stderr
    assert res.stdout.strip() == ""  # refused before running
