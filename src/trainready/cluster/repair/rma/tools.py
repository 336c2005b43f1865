"""The vendor's own tools, run on the node under a time limit: `nvidia-bug-report.sh` (the NVIDIA driver's log
collector, what NVIDIA support asks for first) and `dcgmi diag -r 3 --json` (DCGM's level-3 diagnostic, its
JSON result).  A tool that is not on PATH is said ("absent"), never an error; one that runs past its limit is
killed and said ("timed out after N s"); its output is kept whatever its exit code.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

BUG_REPORT_S = 300.0  # nvidia-bug-report.sh takes ~1-3 min on an 8-GPU node; past 5 min it is stuck
DCGM_DIAG_S = 1800.0  # dcgmi diag -r 3 takes ~10-20 min on 8 H100 (DCGM's level 3: memory, PCIe, targeted stress)


@dataclass(frozen=True)
class ToolRun:
    name: str
    argv: tuple[str, ...]
    outcome: str  # "ran" / "absent" / "timed out" / "failed to start" / "not run here"
    seconds: float = 0.0
    exit_code: int | None = None
    files: tuple[str, ...] = ()  # what it wrote, relative to the folder
    said: str = ""  # one line for people

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "argv": list(self.argv), "outcome": self.outcome, "seconds": round(self.seconds, 1),
                "exit_code": self.exit_code, "files": list(self.files), "said": self.said}


def _run(name: str, argv: list[str], limit_s: float, out: Path, stdout_name: str | None) -> ToolRun:
    exe = shutil.which(argv[0])
    if exe is None:
        return ToolRun(name, tuple(argv), "absent", said=f"{argv[0]}: absent (not on PATH): nothing collected")
    t0 = time.monotonic()
    sink = open(out / stdout_name, "wb") if stdout_name else subprocess.DEVNULL
    try:
        p = subprocess.Popen([exe, *argv[1:]], stdout=sink, stderr=subprocess.DEVNULL, cwd=out,
                             start_new_session=True)
    except OSError as exc:
        return ToolRun(name, tuple(argv), "failed to start", said=f"{argv[0]}: could not start ({exc.strerror})")
    finally:
        if stdout_name:
            sink.close()  # type: ignore[union-attr]
    try:
        code: int | None = p.wait(timeout=limit_s)
        outcome, said = "ran", f"{argv[0]}: ran in {time.monotonic() - t0:.0f} s, exit code {p.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # its own process group: the tool and whatever it started
        p.wait()
        code, outcome, said = None, "timed out", f"{argv[0]}: timed out after {limit_s:.0f} s: killed (kept what it wrote)"
    files = tuple(sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file()))
    return ToolRun(name, tuple(argv), outcome, time.monotonic() - t0, code, files, said)


def collect(dest: Path, bug_report_s: float = BUG_REPORT_S, dcgm_s: float = DCGM_DIAG_S) -> list[ToolRun]:
    """Run both tools into dest/bug-report/ and dest/dcgm/ (made here); each ToolRun's files are relative to dest."""
    runs = []
    for name, argv, sub, stdout_name, limit in (
            ("nvidia-bug-report", ["nvidia-bug-report.sh", "--output-file", "nvidia-bug-report.log"], "bug-report",
             None, bug_report_s),
            ("dcgm-diag", ["dcgmi", "diag", "-r", "3", "--json"], "dcgm", "dcgmi-diag-r3.json", dcgm_s)):
        d = dest / sub
        d.mkdir(parents=True, exist_ok=True)
        r = _run(name, argv, limit, d, stdout_name)
        runs.append(ToolRun(r.name, r.argv, r.outcome, r.seconds, r.exit_code,
                            tuple(f"{sub}/{f}" for f in r.files), r.said))
        if not r.files:
            d.rmdir()
    return runs


def not_here(node: str, collect_cmd: str) -> list[ToolRun]:
    """The tools are the node's: said as not run here, with the command that collects them there."""
    said = f"not run here: it reads {node}'s own GPUs; collect it on the node: {collect_cmd}"
    return [ToolRun("nvidia-bug-report", ("nvidia-bug-report.sh",), "not run here", said=said),
            ToolRun("dcgm-diag", ("dcgmi", "diag", "-r", "3", "--json"), "not run here", said=said)]
