"""Predicted bytes of parameters + gradients + AdamW states == bytes the reference
workload actually holds (fp32 on the CPU, one optimizer step so the states exist).

How the bytes are counted: every parameter, its `.grad`, and AdamW's `exp_avg`
and `exp_avg_sq` (untypedstorage nbytes, so views/sharing cannot hide bytes).
plus AdamW's per-tensor `step` counters (a 0-dim fp32 tensor per parameter
*tensor*: on the CPU for the plain and foreach variants, on the parameters'
device for fused/capturable), which the planner accounts as its own line
`memory.optimizer_step`.  The WHOLE sum must be equal, for every variant
torch runs on the CPU (capturable needs an accelerator).
"""

from __future__ import annotations

import pytest
import torch

from trainready.plan.inputs import Parallel, PlanInput, Training, validate
from trainready.plan.memory import plan_memory
from trainready.plan.model import from_reference
from trainready.workload.model import GPT, PRESETS, ModelConfig


VARIANTS: dict[str, dict[str, bool]] = {"single": {"foreach": False}, "foreach": {"foreach": True},
                                         "fused": {"fused": True}}


def _held_bytes(cfg: ModelConfig, variant: str = "single") -> tuple[int, int, int]:
    """(params + grads + exp_avg + exp_avg_sq bytes, step-counter bytes, parameter tensors) after one step."""
    torch.manual_seed(0)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **VARIANTS[variant])
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len))
    _, loss = model(idx, idx)
    assert loss is not None
    loss.backward()
    opt.step()
    storages: dict[int, int] = {}  # data_ptr -> nbytes, so a shared storage is counted once

    def add(t: torch.Tensor) -> None:
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()

    steps = 0
    params = list(model.parameters())
    for p in params:
        add(p)
        assert p.grad is not None
        add(p.grad)
        st = opt.state[p]
        add(st["exp_avg"])
        add(st["exp_avg_sq"])
        assert st["step"].dtype == torch.float32 and st["step"].dim() == 0
        steps += st["step"].untyped_storage().nbytes()
    return sum(storages.values()), steps, len(params)


STATES = ("memory.weights", "memory.grads", "memory.optimizer", "memory.optimizer_step")


def _predicted(cfg: ModelConfig, precision: str, keys: tuple[str, ...] = STATES) -> float:
    inp = validate(PlanInput(from_reference(cfg), Parallel(dp=1), Training(precision=precision)))
    mp = plan_memory(inp, 1e12)
    return sum(mp.get(k) for k in keys)


@pytest.mark.parametrize(
    "cfg",
    [
        PRESETS["tiny"],
        ModelConfig(vocab_size=300, seq_len=40, n_layer=3, n_head=2, d_model=48, d_ff=100, bias=False),
    ],
    ids=["tiny", "no-bias"],
)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_predicted_states_equal_held_bytes(cfg: ModelConfig, variant: str) -> None:
    states, step_bytes, n_tensors = _held_bytes(cfg, variant)
    held = states + step_bytes
    assert states == 16 * GPT(cfg).num_params()  # 4 (param) + 4 (grad) + 4 + 4 (Adam m, v)
    assert step_bytes == 4 * n_tensors  # AdamW 'step': one fp32 scalar per parameter tensor
    # not by accident: leaving the step counters out, or Megatron's 18 B/param, misses the held bytes.
    assert _predicted(cfg, "fp32", STATES[:3]) == held - step_bytes != held
    assert _predicted(cfg, "bf16-fp32grad") != held
    assert _predicted(cfg, "fp32") == held  # the whole sum, step counters included
    inp = validate(PlanInput(from_reference(cfg), Parallel(dp=1), Training(precision="fp32")))
    assert from_reference(cfg).stage_tensors(1) == n_tensors
    assert plan_memory(inp, 1e12).get("memory.optimizer_step") == 4 * n_tensors


def test_step_counters_per_pipeline_stage_and_unfused() -> None:
    from trainready.plan.model import PRESETS as PLAN_PRESETS, override

    llama = PLAN_PRESETS["llama2-7b"]  # 32 layers: 2 RMSNorm + fused qkv, o + fused gate/up, down = 6 tensors
    assert llama.layer_tensors() == 6 and llama.stage_tensors(1) == 1 + 32 * 6 + 1 + 1
    assert override(llama, fused_qkv=False).layer_tensors() == 9  # Hugging Face: q, k, v, o, gate, up, down
    assert llama.stage_tensors(4) == 8 * 6 + 1 + 1  # last stage (final norm + head) is the larger one


def test_param_count_from_shape_equals_module() -> None:
    for cfg in (PRESETS["tiny"], PRESETS["small"], ModelConfig(bias=False, d_ff=100)):
        spec = from_reference(cfg)
        assert spec.total_params == GPT(cfg).num_params()
    # and a wrong shape does not: one more layer is visibly different
    bigger = from_reference(ModelConfig(n_layer=3))
    assert bigger.total_params != GPT(PRESETS["tiny"]).num_params()
