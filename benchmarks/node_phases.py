"""Where one GPU's `trainready node` time goes, phase by phase, in a fresh process (CUDA synchronised around
each timed region): the fingerprint battery's phases (inputs, the op, the repeats' comparison, hashing, the
float64 error ratio) and the train_step check's parts (model, the steps, each SDPA backend, fused AdamW).

    CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONPATH=src python3 benchmarks/node_phases.py battery standard 5 [runs]
    PYTHONPATH=src python3 benchmarks/node_phases.py train_step
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from typing import Any

T0 = time.perf_counter()


def _timed(mod: Any, name: str, label: str, timers: dict[str, float], sync: Any) -> None:
    f = getattr(mod, name)

    def g(*a: Any, **k: Any) -> Any:
        sync()
        t = time.perf_counter()
        r = f(*a, **k)
        sync()
        timers[label] += time.perf_counter() - t
        return r

    setattr(mod, name, g)


def battery(size: str, repeats: int, runs: int) -> dict[str, Any]:
    import torch

    t_imp = time.perf_counter() - T0
    gpu = torch.cuda.is_available()
    dev = "cuda:0" if gpu else "cpu"
    t = time.perf_counter()
    torch.zeros(1, device=dev)
    if gpu:
        torch.cuda.synchronize()
    t_cuda = time.perf_counter() - t
    from trainready.fingerprint import battery as bat
    from trainready.fingerprint import ops

    timers: dict[str, float] = defaultdict(float)
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    for mod, name in ((ops, "inputs"), (ops, "compute"), (ops, "error_ratio"), (ops, "random_base"),
                      (bat, "digest"), (bat, "first_diff_chunk"), (bat, "supported")):
        if hasattr(mod, name):
            _timed(mod, name, name, timers, sync)
    out: dict[str, Any] = {"import_s": t_imp, "cuda_init_s": t_cuda, "runs": []}
    for _ in range(runs):
        timers.clear()
        res = bat.run_battery(dev, size, repeats, workers=16)
        per_op: dict[str, float] = defaultdict(float)
        for e in res["entries"]:
            per_op[e["op"]] += e["seconds"]
        out["runs"].append({"battery_s": res["battery_s"], "phases": dict(timers), "per_op": dict(per_op),
                            "digests": {e["id"]: e["digest"] for e in res["entries"]}})
        print(f"{size} R={repeats}: battery {res['battery_s']:.2f} s; " +
              ", ".join(f"{k} {v:.2f}" for k, v in timers.items()), flush=True)
    return out


def train_step() -> dict[str, Any]:
    import torch

    t_imp = time.perf_counter() - T0
    t = time.perf_counter()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    out: dict[str, Any] = {"import_s": t_imp, "cuda_init_s": time.perf_counter() - t}
    from torch.nn.attention import SDPBackend

    from trainready.checks import train_step as ts
    from trainready.numerics.kernels import adamw_compare, sdpa_compare, sdpa_inputs
    from trainready.workload.model import GPT

    t = time.perf_counter()
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()
    out["cublas_bf16_first_s"] = time.perf_counter() - t
    if "--dynamo-first" in sys.argv:
        t = time.perf_counter()
        import torch._dynamo  # noqa: F401
        out["import_dynamo_s"] = time.perf_counter() - t
    cfg = ts._model_config(True)
    torch.manual_seed(25)
    m = GPT(cfg).to("cuda:0")
    x = torch.randint(0, cfg.vocab_size, (ts.BATCH, cfg.seq_len + 1), device="cuda:0")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    first: dict[str, float] = {}
    for name, fn in (("fwd", lambda: m(x[:, :-1], x[:, 1:])), ("bwd", None), ("opt_step", lambda: opt.step())):
        torch.cuda.synchronize()
        t = time.perf_counter()
        if name == "fwd":
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                _, loss = fn()
        elif name == "bwd":
            loss.backward()
        else:
            fn()
        torch.cuda.synchronize()
        first[name] = time.perf_counter() - t
    first["dynamo_loaded_after"] = float("torch._dynamo" in sys.modules)
    out["first_step"] = first
    print("first step: " + ", ".join(f"{k} {v:.3f}" for k, v in first.items()), flush=True)
    for rnd in range(2):
        ph: dict[str, float] = {}
        t = time.perf_counter()
        cfg = ts._model_config(True)
        torch.manual_seed(25)
        model = GPT(cfg)
        batch = torch.randint(0, cfg.vocab_size, (ts.BATCH, cfg.seq_len + 1), generator=torch.Generator().manual_seed(26))
        ph["model_build"] = time.perf_counter() - t
        t = time.perf_counter()
        r = ts.train_on_device("cuda:0", model, batch, None, None)
        torch.cuda.synchronize()
        ph["train_8_steps"] = time.perf_counter() - t
        ph["timed_steps_inside"] = r["timed_s"]
        for be in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION):
            t = time.perf_counter()
            try:
                sdpa_compare(sdpa_inputs("cuda:0", True), torch.bfloat16, be, perturb=False)
            except Exception as exc:  # noqa: BLE001
                ph[f"sdpa_{be.name}_error"] = str(exc)[:80]  # type: ignore[assignment]
            torch.cuda.synchronize()
            ph[f"sdpa_{be.name.lower()}"] = time.perf_counter() - t
        t = time.perf_counter()
        adamw_compare([p.detach() for p in model.parameters()], "cuda:0", perturb=False)
        torch.cuda.synchronize()
        ph["adamw"] = time.perf_counter() - t
        out[f"round{rnd}"] = ph
        print(f"train_step round {rnd}: " + ", ".join(f"{k} {v if isinstance(v, str) else round(v, 3)}"
                                                     for k, v in ph.items()), flush=True)
    return out


def main(argv: list[str]) -> int:
    if argv[0] == "battery":
        res = battery(argv[1], int(argv[2]), int(argv[3]) if len(argv) > 3 else 1)
    else:
        res = train_step()
    print(json.dumps({k: v for k, v in res.items() if k != "runs"}, default=str))
    if len(argv) > 4:
        with open(argv[4], "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
