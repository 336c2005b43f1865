"""A measured MFU for the planner: read from a `trainready node --json` report.

The node check `train_step` (checks/train_step.py) times a few steady-state
BF16 training steps of the reference model on each GPU and records, per GPU,

    train_tokens_per_s   tokens/s   labels: model, params, gpu_model (+ gpu index)
    train_mfu            1 (0-1)    = model FLOPs/token × tokens/s / dense BF16 peak (PaLM Appendix B)

`read_mfu` validates the file (exists, JSON, report schema, an MFU metric in
the train_step result) and returns the median over the GPUs.  Every problem is
one `UsageError` line naming the file and what was expected (exit 2).

The figure is a *reference*, not a prediction: a ~20 M-parameter model on a
few thousand tokens per step keeps the tensor cores far less busy than a
multi-billion-parameter model does, so it typically reaches a lower MFU.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from trainready.errors import UsageError
from trainready.records import read_report

MFU_METRIC = "train_mfu"  # fraction 0-1, unit "1"
TOKENS_METRIC = "train_tokens_per_s"  # unit "tokens/s"
CHECK = "train_step"
EXPECTED = "a `trainready node --only train_step --json` report from a GPU node"


@dataclass(frozen=True)
class MeasuredMfu:
    value: float  # median MFU over the GPUs of the report, 0-1
    path: str
    model: str  # reference model preset, e.g. "small"
    params: str  # its parameter count, as recorded
    gpu: str  # GPU product name, e.g. "NVIDIA H200"
    gpus: int  # how many GPUs measured

    def describe(self) -> str:
        many = f"median of {self.gpus} GPUs" if self.gpus > 1 else "1 GPU"
        params = f"{int(self.params):,}" if self.params.isdigit() else self.params
        return (f"measured MFU {self.value * 100:.3g}% from {self.path} ({many}) on reference model "
                f"'{self.model}', {params} params, on {self.gpu}: a small model typically reaches "
                f"a lower MFU than a large one, so read it as a low reference, not a prediction")


def read_mfu(path: str) -> MeasuredMfu:
    """The median `train_mfu` of the train_step result in a node report; bad file → one-line UsageError."""
    where = f"--mfu-from {path}"
    doc = read_report(path, where, EXPECTED)
    result = next((r for r in doc["results"] if isinstance(r, dict) and r.get("name") == CHECK), None)
    if result is None:
        raise UsageError(f"{where}: no '{CHECK}' result in the report (expected {EXPECTED})")
    metrics = result.get("metrics") or []
    if not isinstance(metrics, list):
        raise UsageError(f"{where}: '{CHECK}' metrics is {type(metrics).__name__}, expected a list ({EXPECTED})")
    found = [m for m in metrics if isinstance(m, dict) and m.get("name") == MFU_METRIC]
    values = [m.get("value") for m in found]
    if not found:
        details = result.get("details")
        speed = details.get("throughput") if isinstance(details, dict) else None
        why = speed.get("mfu") if isinstance(speed, dict) else None
        raise UsageError(f"{where}: the '{CHECK}' result has no '{MFU_METRIC}' metric"
                         f"{f' ({why})' if why else ''}; expected {EXPECTED}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1 for v in values):
        raise UsageError(f"{where}: '{MFU_METRIC}' values {values}: expected fractions in (0, 1]")
    labels = found[0].get("labels") if isinstance(found[0].get("labels"), dict) else {}
    return MeasuredMfu(float(statistics.median(values)), path, str(labels.get("model", "?")),  # type: ignore[arg-type]
                       str(labels.get("params", "0")), str(labels.get("gpu_model", "?")), len(values))
