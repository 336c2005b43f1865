"""perftest's `ib_write_bw` (linux-rdma/perftest): one NIC's RDMA write bandwidth to one NIC of another server.

The server side listens (`ib_write_bw -d DEV -i PORT -p TCP ...`), the client connects to it (the same with the
server's address last); the client measures (perftest README: "On all unidirectional bandwidth benchmarks, the
client measures the bandwidth").  With `--report_gbits` its table is, as `ib_write_bw --help` and the tool print it:

     #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
     65536      5000             391.87             391.80 \t\t     0.747299

between two lines of dashes, warnings (`Conflicting CPU frequency values detected ...`) possibly printed between
the header and the row.  `-F` silences the CPU-frequency check; `--use_cuda=N` puts the buffer in GPU N's memory
(GPUDirect RDMA; present only in a perftest built with CUDA: Debian's `perftest` answers "unrecognized option").
What cannot measure is told apart from what measured badly: no RDMA device, perftest missing or built without
CUDA is "not tested" (never a pass, never a fault of the NIC); a run that connected and failed, or did not
connect to a server that had a device, is a failure with perftest's own words.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

TOOL = "ib_write_bw"
TCP_PORT = 18515  # perftest's default listen port (ib_write_bw --help: "-p, --port ... default 18515"); rail i: +i
SIZE_B = 65536  # perftest's default message size (--help: "-s ... default 65536")
ITERS = 5000  # perftest's default exchanges (--help: "-n ... default 5000")
MIB_PER_GBIT = 1e9 / (2**20 * 8)  # --help: "Factor=10^9/(2^20*8)=119.2; MiB=Gb_result * factor"
HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(Gb|MiB)/sec\]\s+BW average\[(Gb|MiB)/sec\]")
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$")
FIELD = re.compile(r"^\s*(Device|Link type|Transport type|Mtu)\s*:\s*(\S+)")
# Its words when it cannot measure at all (perftest's perftest_parameters.c / perftest_resources.c messages).
NO_DEVICE = ("Did not detect devices", "Unable to find the Infiniband/RoCE device", "No IB devices found")
NOT_FOUND = re.compile(r"IB device (\S+) not found")
NO_CUDA = "unrecognized option '--use_cuda"


@dataclass(frozen=True)
class WriteBw:
    """One row of ib_write_bw's table (the client's)."""

    size_b: int
    """Message size in bytes (#bytes)."""
    iterations: int
    """Exchanges measured (#iterations)."""
    peak_gbps: float
    """BW peak in Gb/s (10^9 bit/s; converted from MiB/s where the run printed MiB/s)."""
    avg_gbps: float
    """BW average in Gb/s: the figure judged."""
    msg_rate_mpps: float
    """MsgRate in millions of messages per second."""
    device: str | None
    """The device its header names ("Device : mlx5_3")."""
    link_type: str | None
    """IB or Ethernet ("Link type : IB")."""


@dataclass(frozen=True)
class Outcome:
    """One side's run: a figure, or why not tested, or why it failed."""

    result: WriteBw | None = None
    untested: str | None = None  # perftest cannot measure here (no device, not installed, built without CUDA)
    error: str | None = None  # it tried and failed (connection, a device error): perftest's own line


def argv(device: str, port: int, tcp_port: int, server: str | None = None, cuda: int | None = None,
         tool: str = TOOL) -> list[str]:
    """One side's command: the server's without `server`, the client's with the server's address last."""
    cmd = [tool, "-d", device, "-i", str(port), "-p", str(tcp_port), "-s", str(SIZE_B), "-n", str(ITERS),
           "--report_gbits", "-F"]
    if cuda is not None:
        cmd.append(f"--use_cuda={cuda}")
    return cmd + ([server] if server else [])


def parse_table(text: str) -> WriteBw | None:
    """The (last) row of ib_write_bw's bandwidth table in `text`, in Gb/s; None when there is none."""
    unit, row = None, None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        for part in line.split("\t"):  # the header block prints two fields a line, tab-separated
            m = FIELD.match(part)
            if m and m.group(1) not in fields:
                fields[m.group(1)] = m.group(2)
        h = HEADER.search(line)
        if h:
            unit = h.group(2)
            continue
        r = ROW.match(line.replace("\t", " ")) if unit else None
        if r:
            row = r
    if row is None or unit is None:
        return None
    scale = 1.0 if unit == "Gb" else 1 / MIB_PER_GBIT
    return WriteBw(int(row.group(1)), int(row.group(2)), float(row.group(3)) * scale, float(row.group(4)) * scale,
                   float(row.group(5)), fields.get("Device"), fields.get("Link type"))


def judge_output(stdout: str, stderr: str, rc: int | None) -> Outcome:
    """What one side's run said: its figure, or why it could not measure, or its failure in its own words."""
    text = f"{stdout}\n{stderr}"
    if NO_CUDA in text:
        return Outcome(untested=f"{TOOL} was built without CUDA (--use_cuda unrecognized): GPUDirect not tested")
    if any(s in text for s in NO_DEVICE):
        return Outcome(untested=f"no RDMA device ({TOOL}: {_first(text, NO_DEVICE)})")
    row = parse_table(stdout)
    if row is not None and rc == 0:
        return Outcome(result=row)
    nf = NOT_FOUND.search(text)
    if nf:
        return Outcome(error=f"{TOOL}: IB device {nf.group(1)} not found")
    why = _last_words(stderr) or _last_words(stdout) or "no output"
    return Outcome(error=f"{TOOL} exit {rc if rc is not None else 'none (killed at its time limit)'}: {why}")


def _first(text: str, needles: tuple[str, ...]) -> str:
    return next(n for n in needles if n in text)


def _last_words(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("---")]
    return "; ".join(lines[-2:])[:300]


def installed(tool: str = TOOL) -> str | None:
    """The tool's path on PATH, or None."""
    return shutil.which(tool)


def version(tool: str = TOOL) -> str | None:
    """`ib_write_bw -V` ("Version: 6.06") → "6.06"; None when it does not answer."""
    try:
        out = subprocess.run([tool, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Version:\s*(\S+)", out.stdout + out.stderr)
    return m.group(1) if m else None


def has_cuda(tool: str = TOOL) -> bool:
    """Whether this perftest was built with CUDA: its --help offers --use_cuda (perftest README, "GPUDirect")."""
    try:
        out = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--use_cuda" in out.stdout + out.stderr


def run(cmd: list[str], timeout_s: float) -> Outcome:
    """Run one side to its end (or `timeout_s`), judged by judge_output."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        return Outcome(untested=f"{cmd[0]} not installed (perftest)")
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        o = judge_output(out, err, None)
        return o if o.untested else Outcome(error=f"{TOOL}: no result within {timeout_s:.0f} s: {o.error}")
    return judge_output(p.stdout, p.stderr, p.returncode)
