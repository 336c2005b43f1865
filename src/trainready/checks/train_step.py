"""Question 2, second step: does a real training step work on every device?

The reference workload (`trainready.workload.model.GPT`) overfits one fixed batch
for a few AdamW steps: fp32 on a CPU, BF16 autocast on each GPU (all GPUs at
once).  Judged: every loss finite; the last loss below (1 − LOSS_DROP_MIN) ×
the first; every parameter got a finite gradient at every step and changed.
Then the kernels a training step leans on are cross-checked (see
`numerics/kernels.py`): SDPA's fused backends against a float64 math reference, and
fused AdamW against the for-each implementation.

Informational (never judged): tokens/s of the steady-state steps and, on a GPU
the hardware table knows, MFU = model FLOPs/token × tokens/s / dense BF16 peak
(PaLM Appendix B; `trainready plan --mfu-from` reads it back).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from typing import Any

from trainready.devices.parallel import DeviceRun, local_devices, on_each_device
from trainready.numerics.kernels import adamw_compare, sdpa_compare, sdpa_inputs
from trainready.records import Level, Metric, Outcome, Status, Threshold
from trainready.suite.base import Check, CheckContext, register
from trainready.util.listing import first_of

STEPS = 8
BATCH = 8  # sequences of the model's seq_len (+1 for the shifted targets)
# One fixed batch is memorised quickly: measured first → last over 8 steps, 6.26 → 4.83 (−23 %) for the
# CPU "tiny" preset at lr 3e-3 and 9.11 → 7.37 (−19 % after 6 steps) for "small" at lr 1e-3.  Requiring −5 %
# keeps a 4x margin while a model that does not learn (frozen, NaN, wrong grads) cannot meet it.
LOSS_DROP_MIN = 0.05
LR = {"cpu": 3e-3, "gpu": 1e-3}  # "small" spikes at 3e-3 (a loss jump at step 3 measured), smooth at 1e-3
WARMUP = 1  # untimed first step(s): CUDA context, cuBLAS/SDPA kernel selection, AdamW state allocation


def _preset(on_gpu: bool) -> str:
    return "small" if on_gpu else "tiny"


def _model_config(on_gpu: bool) -> Any:
    from trainready.workload.model import PRESETS

    # Dropout off: the loss of an overfit batch must be a deterministic function of the parameters.
    return dataclasses.replace(PRESETS[_preset(on_gpu)], dropout=0.0)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def train_on_device(device: str, model: Any, batch: Any, freeze: str | None, nan: str | None) -> dict[str, Any]:
    """STEPS AdamW steps on one device. Returns losses, first bad gradient, unchanged parameters, and the
    seconds spent in forward+backward and optimizer.step of the steps after WARMUP (synchronised around
    each timed region; the check's own per-parameter gradient inspection is not timed)."""
    import torch

    m = copy.deepcopy(model).to(device)
    m.train()
    on_gpu = device.startswith("cuda")
    if freeze is not None:
        dict(m.named_parameters())[freeze].requires_grad_(False)  # planted fault
    start = {n: p.detach().clone() for n, p in m.named_parameters()}
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=LR["gpu" if on_gpu else "cpu"])
    x = batch.to(device)
    losses: list[float] = []
    bad_grad: str | None = None
    timed_s = 0.0
    for step in range(STEPS):
        _sync(device)
        t0 = time.perf_counter()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=on_gpu):
            _, loss = m(x[:, :-1], x[:, 1:])
        if nan == "loss" and step == STEPS // 2:
            loss = loss * float("nan")  # planted fault
        opt.zero_grad(set_to_none=True)
        loss.backward()
        _sync(device)
        spent = time.perf_counter() - t0
        if nan == "grad" and step == STEPS // 2:
            next(iter(m.parameters())).grad.view(-1)[0] = float("nan")  # planted fault
        losses.append(float(loss.detach()))
        for n, p in m.named_parameters():
            if bad_grad is None and (p.grad is None or not bool(torch.isfinite(p.grad).all())):
                bad_grad = f"{n} at step {step}: " + ("no gradient" if p.grad is None else "non-finite gradient")
        _sync(device)
        t1 = time.perf_counter()
        opt.step()
        _sync(device)
        if step >= WARMUP:
            timed_s += spent + time.perf_counter() - t1
    unchanged = [n for n, p in m.named_parameters() if torch.equal(p.detach(), start[n])]
    if on_gpu:
        torch.cuda.synchronize(device)
    tokens = (STEPS - WARMUP) * x.shape[0] * (x.shape[1] - 1)  # timed steps × sequences × tokens each
    name = torch.cuda.get_device_name(device) if on_gpu else "cpu"
    return {"losses": losses, "bad_grad": bad_grad, "unchanged": unchanged, "timed_s": timed_s,
            "timed_tokens": tokens, "device_name": name}


def throughput(runs: list[DeviceRun[dict[str, Any]]], cfg: Any, preset: str, metrics: list[Metric]) -> dict[str, Any]:
    """Append tokens/s (every device) and MFU (GPUs in the peak table) metrics; return details.

    MFU = model FLOPs/token × tokens/s / dense BF16 peak (PaLM Appendix B), with FLOPs/token
    6N + 12·L·h·s from `plan.compute.model_flops_per_token` (the planner's own formula).  No peak
    (a CPU, or a GPU the table does not know) → no MFU metric, and details['mfu'] says why.
    """
    from trainready.hardware.gpus import lookup
    from trainready.plan.compute import mfu, model_flops_per_token
    from trainready.plan.measured import MFU_METRIC, TOKENS_METRIC
    from trainready.plan.model import from_reference

    spec = from_reference(cfg, preset)
    per_token = model_flops_per_token(spec)  # FLOP/token
    details: dict[str, Any] = {"model": preset, "params": spec.total_params, "flops_per_token": per_token,
                               "timed_steps": STEPS - WARMUP, "formula": "MFU = (6N + 12·L·h·s) × tokens/s / peak"}
    why: list[str] = []
    seen: list[str] = []  # one "<where> <tokens/s>[, MFU x%]" per device, for the message
    for r in runs:
        if r.value is None or not r.value["timed_s"] > 0:
            continue
        tps = r.value["timed_tokens"] / r.value["timed_s"]  # tokens/s
        name = r.value["device_name"]
        labels: dict[str, object] = {"model": preset, "params": spec.total_params, **r.label}
        if name != "cpu":
            labels["gpu_model"] = name
        metrics.append(Metric.of(TOKENS_METRIC, tps, "tokens/s", None, **labels))
        seen.append(f"{r.where} {tps:,.0f} tokens/s")
        row = lookup(name) if name != "cpu" else None
        if name == "cpu":
            why.append("no MFU on a CPU: the peak table (hardware/gpus.py) lists GPUs only; tokens/s recorded")
        elif row is None:
            why.append(f"no MFU on {r.where}: '{name}' is not in the peak table (hardware/gpus.py); tokens/s recorded")
        else:
            value = mfu(per_token, tps, row.bf16_tflops)
            metrics.append(Metric.of(MFU_METRIC, value, "1", None, peak_tflops=row.bf16_tflops, **labels))
            seen[-1] += f", MFU {value:.1%}"
    if why:
        details["mfu"] = "; ".join(dict.fromkeys(why))
    details["summary"] = (f"'{preset}' ({spec.total_params:,} params): " + first_of(seen, 2)
                          + " (informational)") if seen else ""
    return details


@register
class TrainStepCheck(Check):
    name = "train_step"
    title = "Training steps learn; SDPA backends and fused AdamW agree with references"
    level = Level.QUICK
    order = 25
    timeout_s = 180.0

    def run(self, ctx: CheckContext) -> Outcome:
        import torch

        from trainready.workload.model import GPT

        devices = local_devices(ctx.spec)
        on_gpu = devices[0].startswith("cuda")
        cfg = _model_config(on_gpu)
        torch.manual_seed(25)
        model = GPT(cfg)
        batch = torch.randint(0, cfg.vocab_size, (BATCH, cfg.seq_len + 1), generator=torch.Generator().manual_seed(26))
        freeze = ctx.fault("train_step.freeze")
        if freeze is not None and freeze not in dict(model.named_parameters()):
            freeze = next(iter(dict(model.named_parameters())))  # any value plants it on the first parameter
        nan = ctx.fault("train_step.nan")
        nan = None if nan is None else ("loss" if nan == "loss" else "grad")
        metrics: list[Metric] = []
        bad: list[str] = []
        warn: list[str] = []

        runs = on_each_device(lambda d: train_on_device(d, model, batch, freeze, nan), devices)
        bad += self._judge_train(runs, metrics)
        speed = throughput(runs, cfg, _preset(on_gpu), metrics)  # informational: not judged

        compared = self._sdpa_backends(devices, on_gpu, ctx.fault("train_step.sdpa") is not None, metrics, bad, warn)

        planted_adam = ctx.fault("train_step.adamw") is not None
        params = [p.detach() for p in model.parameters()]
        runs_a = on_each_device(lambda d: adamw_compare(params, d, perturb=planted_adam), devices)
        adam_note = self._judge_adamw(runs_a, metrics, bad, warn)

        where = f"{len(devices)} GPU(s), bf16 autocast" if on_gpu else "cpu, fp32"
        summary = f"SDPA {'/'.join(compared) or 'none'} vs float64 math; {adam_note}"
        return _outcome(runs, where, summary, speed, metrics, bad, warn)

    def _sdpa_backends(self, devices: list[str], on_gpu: bool, planted: bool, metrics: list[Metric], bad: list[str],
                       warn: list[str]) -> list[str]:
        """SDPA: one backend at a time on all devices (sdpa_kernel sets process-global flags); the names compared."""
        import torch
        from torch.nn.attention import SDPBackend

        dtype = torch.bfloat16 if on_gpu else torch.float32
        backends = (
            [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
            if on_gpu
            else [SDPBackend.FLASH_ATTENTION]  # the CPU's fused (flash-style) kernel
        )
        compared: list[str] = []
        for be in backends:
            bname = be.name.lower()
            runs_s = on_each_device(
                lambda d, be=be: sdpa_compare(sdpa_inputs(d, on_gpu), dtype, be, perturb=planted and be == backends[0]),
                devices,
            )
            failed = [r for r in runs_s if r.error]
            optional = be == SDPBackend.CUDNN_ATTENTION  # not every build has it; torch does not pick it first
            if failed and len(failed) == len(runs_s):  # the same everywhere: this build lacks the kernel
                if not optional:
                    warn.append(f"SDPA {bname} not available ({failed[0].error})")
                continue
            if failed:  # works on some GPUs, raises on others: the others are suspect
                bad.extend(f"{r.where}: SDPA {bname} raised {r.error}" for r in failed)
                continue
            compared.append(bname)
            (warn if optional else bad).extend(self._judge_sdpa(bname, runs_s, metrics))
        return compared

    @staticmethod
    def _judge_train(runs: list[DeviceRun[dict[str, Any]]], metrics: list[Metric]) -> list[str]:
        bad: list[str] = []
        for r in runs:
            if r.error or r.value is None:
                bad.append(f"{r.where}: training step raised {r.error}")
                continue
            losses: list[float] = r.value["losses"]
            first, last = losses[0], losses[-1]
            t_drop = Threshold("<=", 1 - LOSS_DROP_MIN, "1", f"last/first loss after {STEPS} steps on one batch (train_step.LOSS_DROP_MIN)")
            ratio = last / first if first and math.isfinite(first) else float("nan")
            metrics.append(Metric.of("train_loss_first", first, "nats", None, **r.label))
            metrics.append(Metric.of("train_loss_last", last, "nats", None, **r.label))
            metrics.append(Metric.of("train_loss_ratio", ratio, "1", t_drop, **r.label))
            metrics.append(Metric.of("train_params_unchanged", len(r.value["unchanged"]), "tensors",
                                     Threshold("==", 0, "tensors", "every parameter must change"), **r.label))
            nonfinite = [i for i, x in enumerate(losses) if not math.isfinite(x)]
            if nonfinite:
                bad.append(f"{r.where}: loss not finite from step {nonfinite[0]} ({losses[nonfinite[0]]})")
            if r.value["bad_grad"]:
                bad.append(f"{r.where}: parameter {r.value['bad_grad']}")
            if r.value["unchanged"]:
                bad.append(f"{r.where}: parameter(s) not updated: {', '.join(r.value['unchanged'][:3])}")
            if not nonfinite and not ratio <= 1 - LOSS_DROP_MIN:
                bad.append(f"{r.where}: loss {first:.3f} → {last:.3f} fell less than {LOSS_DROP_MIN:.0%} in {STEPS} steps")
        return bad

    @staticmethod
    def _judge_sdpa(bname: str, runs: list[DeviceRun[dict[str, dict[str, float]]]], metrics: list[Metric]) -> list[str]:
        bad: list[str] = []
        for r in runs:
            assert r.value is not None
            for tensor, v in r.value.items():
                thr = Threshold("<=", v["tol"], "1", "3x naive low-precision attention error + 4 ulp of max|ref| (numerics/kernels.py)")
                metrics.append(Metric.of("sdpa_max_abs_diff", v["err"], "1", thr, backend=bname, tensor=tensor, **r.label))
                if not v["err"] <= v["tol"]:
                    bad.append(f"{r.where}: SDPA {bname} {tensor} differs from float64 math backend by {v['err']:.3g} > {v['tol']:.3g}")
        return bad

    @staticmethod
    def _judge_adamw(runs: list[DeviceRun[dict[str, float] | None]], metrics: list[Metric], bad: list[str], warn: list[str]) -> str:
        for r in runs:
            if r.error:
                bad.append(f"{r.where}: AdamW comparison raised {r.error}")
                continue
            if r.value is None:
                return "fused AdamW: n/a (this torch has no fused AdamW on this device)"
            thr = Threshold("<=", r.value["tol"], "1", "ulps per step x steps (numerics/kernels.py ADAMW_ULPS_PER_STEP)")
            metrics.append(Metric.of("adamw_fused_max_abs_diff", r.value["err"], "1", thr, **r.label))
            if not r.value["err"] <= r.value["tol"]:
                bad.append(f"{r.where}: fused AdamW differs from for-each by {r.value['err']:.3g} > {r.value['tol']:.3g}")
        return "fused AdamW vs for-each agree"


def _outcome(runs: list[DeviceRun[dict[str, Any]]], where: str, summary: str, speed: dict[str, Any],
             metrics: list[Metric], bad: list[str], warn: list[str]) -> Outcome:
    """FAIL naming up to five findings; else WARN for a missing or disagreeing optional kernel; else PASS."""
    if bad:
        return Outcome(
            Status.FAIL,
            first_of(bad, 5),
            tuple(metrics),
            remedy="A step that does not learn or kernels that disagree: for one GPU suspect the hardware (dcgmi diag -r 3); "
            "on every GPU suspect the torch/CUDA build (rerun with the image's reference node).",
            details={"throughput": speed},
        )
    losses = runs[0].value["losses"] if runs[0].value else []
    msg = f"{STEPS} AdamW steps on {where}: loss {losses[0]:.3f} → {losses[-1]:.3f}, all parameters updated; {summary}"
    msg += f"; {speed['summary']}" if speed.get("summary") else ""
    if warn:
        return Outcome(Status.WARN, msg + "; " + "; ".join(warn), tuple(metrics),
                       remedy="A fused SDPA kernel is missing (training falls back to a slower one) or the optional cuDNN "
                       "attention disagrees (do not enable it for training on this image).", details={"throughput": speed})
    return Outcome(Status.PASS, msg, tuple(metrics), details={"throughput": speed})
