"""The torch-amp activation formula against the tensors autograd really saves.

On the CPU, run the reference GPT's forward under torch.autocast(bf16) and
record every tensor autograd saves for backward (saved_tensors_hooks), counting
each storage once.  Those bytes minus the fp32 parameters must equal the
planner's activations (layers + embedding/output) plus the bf16 weight copies.
Dropout is off because the CPU SDPA kernel only takes the flash path without
dropout (on a GPU the benchmark covers dropout).  The only bytes the planner
leaves out are nll_loss's 4-byte `total_weight` scalar.
"""

from __future__ import annotations

import pytest
import torch

from trainready.plan.activations import activation_quantities
from trainready.plan.inputs import Parallel, PlanInput, Training, validate
from trainready.plan.memory import linear_params_per_gpu
from trainready.plan.model import from_reference
from trainready.workload.model import GPT, ModelConfig


def _saved_bytes(cfg: ModelConfig, b: int) -> int:
    torch.manual_seed(0)
    model = GPT(cfg).train()
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
        return t

    x = torch.randint(0, cfg.vocab_size, (b, cfg.seq_len))
    y = torch.randint(0, cfg.vocab_size, (b, cfg.seq_len))  # its own storage, as in training
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x, y)[1]
    assert loss is not None
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(n for ptr, n in seen.items() if ptr not in params)


def _predicted(cfg: ModelConfig, b: int, precision: str = "amp") -> float:
    inp = validate(PlanInput(from_reference(cfg), Parallel(dp=1), Training(precision=precision, micro_batch=b)))
    q = {a.key: a.value for a in activation_quantities(inp)}
    copies = 2 * linear_params_per_gpu(inp) if precision == "amp" else 0
    return q["activations.layers"] + q["activations.extra"] + copies


@pytest.mark.parametrize(
    "cfg, b",
    [
        (ModelConfig(dropout=0.0), 4),
        (ModelConfig(vocab_size=300, seq_len=48, n_layer=3, n_head=2, d_model=32, d_ff=96, dropout=0.0, bias=False), 3),
    ],
    ids=["tiny", "no-bias"],
)
def test_saved_tensors_equal_prediction(cfg: ModelConfig, b: int) -> None:
    saved = _saved_bytes(cfg, b)
    assert saved != _predicted(cfg, b, "bf16")  # the Megatron layout is a different account
    assert saved - _predicted(cfg, b) == 4  # nll_loss total_weight (fp32 scalar)
