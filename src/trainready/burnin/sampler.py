"""The side thread that reads every GPU through NVML at >= 1 Hz while the load runs (OUT/samples.jsonl).

The run is cut into blocks of `block_s`; odd blocks sample AMPLIFY times faster.  Comparing the load's
throughput in the two kinds of block, side by side through the whole run (so warming and drift fall on both
alike), gives what sampling costs the load: the fast blocks cost AMPLIFY - 1 times the extra, so the cost at
the base rate is their difference / (AMPLIFY - 1) (judge.sampling_cost).  The thread also times itself (the
seconds its NVML reads take, per sample).  It never stops sampling: a side-by-side with sampling off would
leave minutes of the run unwatched.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Callable

from trainready.burnin import nvml

AMPLIFY = 10  # the fast blocks' rate, x the base rate (1 Hz → 10 Hz)
BLOCK_S = 10.0  # seconds per block on a long run (a shorter run: an eighth of it, at least 0.5 s)


def block_seconds(duration_s: float) -> float:
    return max(0.5, min(BLOCK_S, duration_s / 8))


class Sampler(threading.Thread):
    """Samples `handles` (none on a machine without NVML: the rows then carry only the time) until `stop()`."""

    def __init__(self, path: Path, hz: float, block_s: float, nv: Any = None, handles: list[Any] | None = None,
                 xids: nvml.Xids | None = None, on_tick: Callable[[float], None] | None = None) -> None:
        super().__init__(name="burnin-sampler", daemon=True)
        self.path, self.hz, self.block_s = path, hz, block_s
        self.nv, self.handles, self.xids, self.on_tick = nv, handles or [], xids, on_tick
        self._halt = threading.Event()
        self.error = ""
        self.last: dict[str, Any] | None = None  # the latest row (the progress line reads it)

    def stop(self) -> None:
        self._halt.set()
        self.join(5.0)

    def run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - said in the result, never a crash of the check
            self.error = f"{type(exc).__name__}: {exc}"

    def _loop(self) -> None:
        start = time.time()
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"start": start, "hz": self.hz, "block_s": self.block_s, "amplify": AMPLIFY}) + "\n")
            due, ticked = start, 0.0
            while not self._halt.is_set():
                now = time.time()
                fast = int((now - start) // self.block_s) % 2 == 1
                out.write(json.dumps(self._row(now, fast)) + "\n")
                out.flush()
                if self.on_tick is not None and now - ticked >= 1.0:
                    ticked = now
                    self.on_tick(now)
                due = max(due + 1.0 / (self.hz * (AMPLIFY if fast else 1)), time.time() - 1.0)
                self._halt.wait(max(0.0, due - time.time()))

    def _row(self, now: float, fast: bool) -> dict[str, Any]:
        c0 = time.perf_counter()
        gpus = [nvml.sample(self.nv, h) for h in self.handles]
        events = self.xids.poll() if self.xids is not None else []
        row: dict[str, Any] = {"t": now, "fast": fast, "gpus": gpus, "cost_s": time.perf_counter() - c0}
        if events:
            row["xid"] = events
        self.last = row
        return row
