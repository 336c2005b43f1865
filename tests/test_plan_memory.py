"""Planner memory/checkpoint/compute against published, hand-worked numbers."""

from __future__ import annotations

import pytest

from trainready.errors import UsageError
from trainready.plan.activations import activation_quantities
from trainready.plan.inputs import Hardware, Parallel, PlanInput, Training, validate
from trainready.plan.memory import plan_memory
from trainready.plan.model import PRESETS, ModelSpec, preset
from trainready.plan.planner import make_plan

STATES = ("memory.weights", "memory.grads", "memory.optimizer", "memory.main_grad_shard")


def _states_gb(inp: PlanInput) -> float:
    mp = plan_memory(validate(inp), 80e9)
    return sum(q.value for q in mp.items if q.key in STATES) / 1e9


def test_zero_paper_7_5b_on_64_gpus() -> None:
    # Rajbhandari et al. 2020, Figure 1: Ψ = 7.5 B, N_d = 64, K = 12 → 120 / 31.4 / 16.6 / 1.9 GB.
    model = ModelSpec(params=7_500_000_000)
    # not by accident: without data parallelism every stage is the full 120 GB.
    assert round(_states_gb(PlanInput(model, Parallel(dp=1, zero=3))), 1) == 120.0
    got = [round(_states_gb(PlanInput(model, Parallel(dp=64, zero=z))), 1) for z in range(4)]
    assert got == [120.0, 31.4, 16.6, 1.9]


def test_megatron_18_bytes_and_distributed_optimizer() -> None:
    model = ModelSpec(params=1_000_000_000)
    tr = Training(precision="bf16-fp32grad")
    assert _states_gb(PlanInput(model, Parallel(dp=8), tr)) == pytest.approx(18.0)
    # Megatron docs: distributed optimizer 6 + 12/d bytes/param.
    assert _states_gb(PlanInput(model, Parallel(dp=8, distributed_optimizer=True), tr)) == pytest.approx(6 + 12 / 8)


@pytest.mark.parametrize("precision, table", [("bf16", 4 + 16 / 8), ("bf16-fp32grad", 6 + 12 / 8), ("fp32", 8 + 8 / 8)])
def test_distributed_optimizer_matches_megatron_table(precision: str, table: float) -> None:
    # Megatron-LM docs/source/api-guide/dist_optimizer.md, bytes/param with d = 8:
    # 16-bit params + 16-bit grads 4 + 16/d (fp32 main grads sharded too); bf16 + fp32 grads 6 + 12/d; fp32 8 + 8/d.
    model = ModelSpec(params=1_000_000_000)
    got = _states_gb(PlanInput(model, Parallel(dp=8, distributed_optimizer=True), Training(precision=precision)))
    if precision == "bf16":  # not by accident: ZeRO-1's 4 + 12/d is not Megatron's figure
        assert _states_gb(PlanInput(model, Parallel(dp=8, zero=1), Training(precision=precision))) == 4 + 12 / 8 != table
    assert got == pytest.approx(table)


def test_seed_500b_checkpoint_is_about_7_tb() -> None:
    plan = make_plan(PlanInput(ModelSpec(params=500_000_000_000), Parallel(dp=1)))
    ck = {q.key: q.value for q in plan.checkpoint}
    assert ck["checkpoint.weights_only"] == 1.0e12  # 2 B/param: not the 7 TB figure
    assert ck["checkpoint.full"] == 7.0e12  # 2 + 4 + 4 + 4 = 14 B/param
    shaped = make_plan(PlanInput(preset("dense-500b"), Parallel(dp=1)))
    assert next(q.value for q in shaped.checkpoint if q.key == "checkpoint.full") == pytest.approx(7.0e12, rel=0.01)


def test_slow_nas_stalls_70b_more_than_10_minutes() -> None:
    # The bring-up guide: a 70 B checkpoint on a slow NAS stops training for 10+ minutes.
    plan = make_plan(PlanInput(preset("llama2-70b"), Parallel(tp=8, pp=8, dp=1), hardware=Hardware(storage_gbps=1.0)))
    t = next(q.value for q in plan.checkpoint if q.key == "checkpoint.write_time")
    assert t / 60 == pytest.approx(68_976_648_192 * 14 / 1e9 / 60)
    assert t > 600


# GPT-3 175B-like shape, Korthikanti et al. 2022 Table 2, one layer, s = 2048, b = 1, h = 12288, a = 96, t = 8:
# sbh = 25,165,824 and 5as/h = 5·96·2048/12288 = 80.
SBH = 2048 * 12288
HAND = {
    "none, t=1": SBH * (34 + 80),  # 2,868,903,936
    "tp": SBH * (10 + 24 / 8 + 80 / 8),  # 578,813,952
    "tp+sp": SBH * (34 / 8 + 80 / 8),  # 358,612,992
    "tp+selective": SBH * (10 + 24 / 8),  # 327,155,712
    "tp+sp+selective": SBH * 34 / 8,  # 106,954,752
    "full": SBH * 2,  # 50,331,648
}


def _per_layer(tp: int, sp: bool, rc: str, attention: str = "classic") -> float:
    inp = validate(PlanInput(PRESETS["gpt3-175b"], Parallel(tp=tp, dp=1, sp=sp), Training(recompute=rc, attention=attention)))
    return next(q.value for q in activation_quantities(inp) if q.key == "activations.per_layer")


def test_activation_table2_gpt3_175b() -> None:
    assert HAND["tp"] == 578_813_952 and HAND["tp+sp+selective"] == 106_954_752
    assert _per_layer(1, False, "none") == HAND["none, t=1"] == 2_868_903_936
    assert _per_layer(8, False, "none") == HAND["tp"]
    assert _per_layer(8, True, "none") == HAND["tp+sp"]
    assert _per_layer(8, False, "selective") == HAND["tp+selective"]
    assert _per_layer(8, True, "selective") == HAND["tp+sp+selective"]
    assert _per_layer(8, False, "full") == HAND["full"]
    # flash attention: no 5as/h term, only the fp32 log-sum-exp 4·a·s·b / t
    assert _per_layer(8, True, "none", "flash") == HAND["tp+sp+selective"] + 4 * 96 * 2048 / 8


def test_pipeline_first_stage_holds_all_layers_worth() -> None:
    # Korthikanti §4.2.3: with 1F1B the first stage stores p micro-batches of L/p layers = L layers' worth.
    def layers(pp: int) -> float:
        inp = validate(PlanInput(PRESETS["gpt3-175b"], Parallel(tp=8, pp=pp, dp=1, sp=True),
                                 Training(global_batch=64, attention="classic")))
        return next(q.value for q in activation_quantities(inp) if q.key == "activations.layers")

    assert layers(8) == layers(1) == 96 * HAND["tp+sp"]


def test_count_only_model_has_no_activations_but_a_verdict() -> None:
    plan = make_plan(PlanInput(ModelSpec(params=7_500_000_000), Parallel(dp=64, zero=3), hardware=Hardware(gpu="H100")))
    assert not plan.memory.has_activations and plan.memory.verdict == "fits"
    big = make_plan(PlanInput(ModelSpec(params=7_500_000_000), Parallel(dp=1), hardware=Hardware(gpu="H100")))
    assert big.memory.verdict == "does not fit"  # 120 GB of states on an 80 GB GPU


def test_compute_6nd() -> None:
    plan = make_plan(PlanInput(ModelSpec(params=7_500_000_000), Parallel(dp=64), Training(tokens=1e12, mfu=0.5),
                               Hardware(gpu_mem_gib=80, peak_tflops=989)))
    c = {q.key: q.value for q in plan.compute}
    assert c["compute.total_flops"] == 6 * 7.5e9 * 1e12
    assert c["compute.time"] == pytest.approx(6 * 7.5e9 * 1e12 / (64 * 989e12 * 0.5))


def test_compute_time_reproduces_the_stated_flops() -> None:
    # A shaped model: both totals are shown, and time × throughput gives back the one the time says it uses.
    plan = make_plan(PlanInput(PRESETS["llama2-7b"], Parallel(dp=64), Training(tokens=2e12, mfu=0.4),
                               Hardware(gpu_mem_gib=80, peak_tflops=989)))
    c = {q.key: q for q in plan.compute}
    m = PRESETS["llama2-7b"]
    n, rate = m.total_params, 64 * 989e12 * 0.4  # FLOP/s of the job
    assert c["compute.total_flops"].value == 6 * n * 2e12 and "Kaplan" in c["compute.total_flops"].source
    attn = c["compute.total_flops_attn"]
    assert attn.value == (6 * n + 12 * m.layers * m.hidden * m.seq_len) * 2e12 and "PaLM" in attn.source
    stated = c["compute.time"].value * rate
    # not by accident: the time is not computed from 6·N·D ...
    assert stated != pytest.approx(c["compute.total_flops"].value, rel=1e-3)
    # ... but from the total it names.
    assert stated == pytest.approx(attn.value, rel=1e-12) and "(6N + 12·L·h·s)·D" in c["compute.time"].label
    assert c["compute.gpu_hours"].value == pytest.approx(attn.value / rate * 64 / 3600)


@pytest.mark.parametrize(
    "inp, words",
    [
        (PlanInput(ModelSpec(layers=2, hidden=100, heads=3, vocab=10, seq_len=8)), "must divide hidden"),
        (PlanInput(PRESETS["llama2-7b"], Parallel(tp=3)), "must divide the number of heads"),
        (PlanInput(PRESETS["llama2-7b"], Parallel(tp=8, gpus=20)), "not a multiple"),
        (PlanInput(PRESETS["llama2-7b"], Parallel(tp=2, dp=2, gpus=8)), "is not tp·pp·cp·dp"),
        (PlanInput(ModelSpec(params=-5)), ">= 0"),
        (PlanInput(PRESETS["llama2-7b"], training=Training(micro_batch=2, global_batch=3)), "global-batch"),
    ],
)
def test_impossible_inputs(inp: PlanInput, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        validate(inp)


def test_preset_counts_match_published() -> None:
    # Hugging Face model cards / safetensors totals.
    assert PRESETS["llama2-7b"].total_params == 6_738_415_616
    assert PRESETS["llama2-70b"].total_params == 68_976_648_192
    assert PRESETS["llama3-8b"].total_params == 8_030_261_248
    assert PRESETS["llama3-405b"].total_params == 405_853_388_800
    assert 174e9 < PRESETS["gpt3-175b"].total_params < 176e9
