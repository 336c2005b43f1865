import dataclasses

import pytest
import torch
from torch.nn.attention import SDPBackend

from trainready.checks import REGISTRY, CheckContext
from trainready.checks.train_step import LOSS_DROP_MIN, _model_config, train_on_device
from trainready.numerics.kernels import adamw_compare, sdpa_compare, sdpa_inputs
from trainready.records import Status
from trainready.spec import default_spec
from trainready.workload.model import GPT

WHERE = "GPU 0" if torch.cuda.is_available() else "cpu"  # how the check names device 0


def _run(tmp_path, faults=None):
    return REGISTRY["train_step"]().execute(CheckContext(default_spec(), tmp_path, faults or {}))


@pytest.fixture(scope="module")
def model_and_batch():
    cfg = _model_config(on_gpu=False)
    assert cfg.dropout == 0.0
    torch.manual_seed(25)
    return GPT(cfg), torch.randint(0, cfg.vocab_size, (8, cfg.seq_len + 1), generator=torch.Generator().manual_seed(26))


@pytest.mark.slow
def test_frozen_parameter_is_named_before_clean_run_passes(model_and_batch):
    model, batch = model_and_batch
    bad = train_on_device("cpu", model, batch, freeze="blocks.1.mlp.0.bias", nan=None)
    assert bad["bad_grad"] == "blocks.1.mlp.0.bias at step 0: no gradient"
    assert bad["unchanged"] == ["blocks.1.mlp.0.bias"]
    good = train_on_device("cpu", model, batch, freeze=None, nan=None)
    assert good["bad_grad"] is None and good["unchanged"] == []
    first, last = good["losses"][0], good["losses"][-1]
    assert last <= (1 - LOSS_DROP_MIN) * first  # the model learns the batch
    # the source model was not trained in place (each device trains a copy)
    assert train_on_device("cpu", model, batch, None, None)["losses"] == good["losses"]


@pytest.mark.parametrize("where", ["grad", "loss"])
def test_nan_is_caught(model_and_batch, where):
    model, batch = model_and_batch
    r = train_on_device("cpu", model, batch, freeze=None, nan=where)
    if where == "grad":
        assert r["bad_grad"] == "tok_emb.weight at step 4: non-finite gradient"
    else:
        assert r["losses"][4] != r["losses"][4]  # NaN
        assert "non-finite gradient" in r["bad_grad"]


def test_sdpa_perturbed_backend_fails_clean_agrees():
    inp = sdpa_inputs("cpu", on_gpu=False)
    bad = sdpa_compare(inp, torch.float32, SDPBackend.FLASH_ATTENTION, perturb=True)
    assert bad["out"]["err"] > bad["out"]["tol"]
    good = sdpa_compare(inp, torch.float32, SDPBackend.FLASH_ATTENTION)
    for name, v in good.items():
        # a real comparison: the fused kernel differs from float64, by no more than the bound
        assert 0 < v["err"] <= v["tol"], name
        assert v["tol"] < 1e-4  # tight enough to mean something in fp32


def test_adamw_fused_vs_foreach(model_and_batch):
    params = [p.detach() for p in model_and_batch[0].parameters()]
    bad = adamw_compare(params, "cpu", perturb=True)
    assert bad is not None and bad["err"] > bad["tol"]
    good = adamw_compare(params, "cpu")
    assert good is not None and good["err"] <= good["tol"] < 1e-4


@pytest.mark.slow
def test_check_fails_on_each_planted_fault_then_passes(tmp_path):
    frozen = _run(tmp_path, {"train_step.freeze": "lm_head.weight"})
    assert frozen.status == Status.FAIL
    assert f"{WHERE}: parameter lm_head.weight at step 0: no gradient" in frozen.message
    assert "not updated: lm_head.weight" in frozen.message
    nan = _run(tmp_path, {"train_step.nan": "grad"})
    assert nan.status == Status.FAIL and "non-finite gradient" in nan.message
    sdpa = _run(tmp_path, {"train_step.sdpa": "1"})
    assert sdpa.status == Status.FAIL and "SDPA flash_attention out differs" in sdpa.message
    adam = _run(tmp_path, {"train_step.adamw": "1"})
    assert adam.status == Status.FAIL and "fused AdamW differs" in adam.message
    good = _run(tmp_path)
    assert good.status == Status.PASS, good.message
    assert "SDPA flash_attention" in good.message and "vs float64 math" in good.message
    assert "fused AdamW vs for-each agree" in good.message
    ratio = next(m for m in good.metrics if m.name == "train_loss_ratio")
    assert ratio.ok and ratio.value < 1 - LOSS_DROP_MIN
    assert all(m.ok for m in good.metrics)


def test_gpu_config_is_the_small_preset():
    cfg = _model_config(on_gpu=True)
    assert cfg.d_model == 512 and cfg.dropout == 0.0
    assert dataclasses.replace(cfg, dropout=0.1) != cfg
