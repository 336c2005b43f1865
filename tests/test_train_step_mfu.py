"""train_step's informational throughput: model FLOPs/token, MFU, and what a CPU run records."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trainready.checks import REGISTRY, CheckContext
from trainready.checks.train_step import STEPS, WARMUP, _model_config, throughput
from trainready.devices.parallel import DeviceRun
from trainready.plan.compute import mfu, model_flops_per_token
from trainready.plan.model import ModelSpec, from_reference
from trainready.records import Metric, Status
from trainready.spec import default_spec
from trainready.workload.model import GPT


def test_flops_per_token_and_mfu_hand_worked() -> None:
    tiny = from_reference(_model_config(on_gpu=False), "tiny")
    # tiny: V=512, h=64, s=64, L=2, f=256, biases. By hand: tok 512·64 = 32,768; pos 64·64 = 4,096;
    # per layer 2 LN (128 each) + qkv 64·192+192 + proj 64·64+64 + fc 64·256+256 + out 256·64+64 = 49,984;
    # final LN 128; head 512·64 = 32,768 → 32,768 + 4,096 + 2·49,984 + 128 + 32,768 = 169,728.
    assert tiny.total_params == 169_728 == GPT(_model_config(on_gpu=False)).num_params()
    # 6N + 12·L·h·s = 6·169,728 + 12·2·64·64 = 1,018,368 + 98,304
    assert model_flops_per_token(tiny) == 1_116_672
    assert model_flops_per_token(ModelSpec(params=1_000_000_000)) == 6e9  # count only: 6N
    # MFU = 6e9 FLOP/token × 50,000 token/s / (1,000 TFLOP/s) = 3e14 / 1e15
    assert mfu(6e9, 50_000, 1000.0) == pytest.approx(0.3, rel=1e-15)
    with pytest.raises(ValueError):
        mfu(6e9, 50_000, 0.0)


def _fake_run(device: str, name: str, seconds: float, tokens: int) -> DeviceRun:
    return DeviceRun(device, {"losses": [1.0], "bad_grad": None, "unchanged": [], "timed_s": seconds,
                              "timed_tokens": tokens, "device_name": name}, None)


def test_throughput_mfu_only_for_gpus_in_the_peak_table() -> None:
    cfg = _model_config(on_gpu=True)
    small = from_reference(cfg, "small")
    metrics: list[Metric] = []
    runs = [_fake_run("cuda:0", "NVIDIA H200", 0.5, 100_000), _fake_run("cuda:1", "NVIDIA Foo 9000", 0.5, 100_000)]
    details = throughput(runs, cfg, "small", metrics)
    by = {(m.name, m.label_dict.get("gpu")): m for m in metrics}
    assert by[("train_tokens_per_s", "0")].value == 200_000 == by[("train_tokens_per_s", "1")].value
    h200 = by[("train_mfu", "0")]  # 989.4 TFLOP/s dense BF16 (hardware/gpus.py)
    assert h200.value == pytest.approx(model_flops_per_token(small) * 200_000 / 989.4e12, rel=1e-12)
    assert h200.label_dict == {"model": "small", "params": str(small.total_params), "gpu": "0",
                               "gpu_model": "NVIDIA H200", "peak_tflops": "989.4"} and h200.unit == "1"
    assert ("train_mfu", "1") not in by  # unknown GPU: no invented number ...
    assert "GPU 1" in details["mfu"] and "'NVIDIA Foo 9000' is not in the peak table" in details["mfu"]  # ... but why


def test_cpu_run_records_tokens_per_s_and_why_no_mfu(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("the CPU path")
    res = REGISTRY["train_step"]().execute(CheckContext(default_spec(), tmp_path, {}))
    assert res.status == Status.PASS
    names = [m.name for m in res.metrics]
    assert "train_mfu" not in names and names.count("train_tokens_per_s") == 1
    tps = next(m for m in res.metrics if m.name == "train_tokens_per_s")
    assert tps.value > 0 and tps.unit == "tokens/s" and tps.threshold is None  # informational, never judged
    assert tps.label_dict == {"device": "cpu", "model": "tiny", "params": "169728"}
    speed = res.details["throughput"]
    assert "no MFU on a CPU" in speed["mfu"] and speed["timed_steps"] == STEPS - WARMUP
    assert "tokens/s" in res.message
