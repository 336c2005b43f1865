"""`trainready plan`: memory per GPU, checkpoint size and write time, compute, parallel layouts."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any, Optional

import typer

from trainready.commands.common import check_out_path, options_command, write_json_doc
from rich.console import Console

from trainready.errors import UsageError

_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def parse_count(text: str | None, flag: str) -> float | None:
    """'7.5e9', '7.5B', '70b', '15T' → a number; anything else is a one-line usage error."""
    if text is None:
        return None
    mt = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMbBgGtT]?)\s*", text)
    if not mt:
        raise UsageError(f"{flag} '{text}': expected a number such as 7.5e9, 7.5B or 15T")
    return float(mt.group(1)) * _SUFFIX[mt.group(2).upper()]


def _opt(default: Any, help: str, *names: str) -> Any:
    return typer.Option(default, *names, help=help, show_default=False)


@dataclass(frozen=True)
class PlanArgs:
    """`trainready plan`'s command line (None = from --file, the preset or the planner's default)."""

    preset: Optional[str] = _opt(None, "Model preset (see --list-presets).", "--preset", "-p")
    file: Optional[str] = _opt(None, "Plan file (TOML, tables model / parallel / training / hardware); flags override it.", "--file", "-f")
    params: Optional[str] = _opt(None, "Parameter count for a count-only model, e.g. 7.5B.", "--params")
    layers: Optional[int] = _opt(None, "Layers L.", "--layers")
    hidden: Optional[int] = _opt(None, "Hidden size h.", "--hidden")
    heads: Optional[int] = _opt(None, "Attention heads a.", "--heads")
    kv_heads: Optional[int] = _opt(None, "Key/value heads (GQA).", "--kv-heads")
    ffn: Optional[int] = _opt(None, "MLP inner size f (default 4h).", "--ffn")
    vocab: Optional[int] = _opt(None, "Vocabulary V.", "--vocab")
    seq_len: Optional[int] = _opt(None, "Sequence length s.", "--seq-len")
    gated_mlp: Optional[bool] = _opt(None, "SwiGLU MLP (3 matrices).", "--gated-mlp/--plain-mlp")
    dropout: Optional[bool] = _opt(None, "Dropout on/off.", "--dropout/--no-dropout")
    tp: Optional[int] = _opt(None, "Tensor-parallel degree.", "--tp")
    pp: Optional[int] = _opt(None, "Pipeline-parallel degree.", "--pp")
    cp: Optional[int] = _opt(None, "Context-parallel degree.", "--cp")
    dp: Optional[int] = _opt(None, "Data-parallel degree (default: gpus / (tp·pp·cp)).", "--dp")
    gpus: Optional[int] = _opt(None, "World size (GPUs).", "--gpus", "-n")
    zero: Optional[int] = _opt(None, "ZeRO stage 0-3.", "--zero")
    fsdp: Optional[str] = _opt(None, "FSDP sharding: full (= ZeRO-3), grad-op (= ZeRO-2), none.", "--fsdp")
    sp: Optional[bool] = _opt(None, "Megatron sequence parallelism.", "--sp/--no-sp")
    dist_opt: Optional[bool] = _opt(None, "Megatron distributed optimizer (ZeRO-1 accounting).", "--distributed-optimizer/--no-distributed-optimizer")
    micro_batch: Optional[int] = _opt(None, "Micro-batch size b (default 1).", "--micro-batch", "-b")
    global_batch: Optional[int] = _opt(None, "Global batch in sequences (default b·dp).", "--global-batch")
    precision: Optional[str] = _opt(None, "bf16 (2+2+12, default), bf16-fp32grad (Megatron 18), fp32, amp.", "--precision")
    recompute: Optional[str] = _opt(None, "Activation recomputation: none (default), selective, full.", "--recompute")
    attention: Optional[str] = _opt(None, "flash (default) or classic (stores s² scores).", "--attention")
    tokens: Optional[str] = _opt(None, "Training tokens D for compute, e.g. 15T.", "--tokens")
    mfu: Optional[float] = _opt(None, "Assumed MFU, 0-1 (default 0.40).", "--mfu")
    mfu_from: Optional[str] = _opt(None, "Measured MFU from a `trainready node --json` report (train_step on a GPU).", "--mfu-from")
    spec: Optional[str] = _opt(None, "Node spec (PATH or example:NAME): the GPU model of its [gpu] section, via the hardware table.", "--spec")
    gpu: Optional[str] = _opt(None, "GPU name from the hardware table: H100 (default), H200, B200, 'A100 80GB', ...", "--gpu")
    gpu_mem_gib: Optional[float] = _opt(None, "GPU memory, GiB (overrides the table).", "--gpu-mem-gib")
    peak_tflops: Optional[float] = _opt(None, "Dense BF16 peak TFLOP/s (overrides the table).", "--peak-tflops")
    storage_gbps: Optional[float] = _opt(None, "Aggregate checkpoint write bandwidth, GB/s (default 10).", "--storage-gbps")
    ckpt_interval_min: Optional[float] = _opt(None, "Minutes between checkpoints (default 60).", "--ckpt-interval-min")
    runtime_gib: Optional[float] = _opt(None, "Allowance outside the allocator, GiB (default 2).", "--runtime-gib")
    fragmentation: Optional[float] = _opt(None, "Fragmentation allowance, fraction of peak (default 0.10).", "--fragmentation")
    headroom: Optional[float] = _opt(None, "Free fraction below which the verdict is 'tight' (default 0.05).", "--headroom")
    do_search: bool = typer.Option(False, "--search", help="Also list the parallel layouts that fit, ranked by a heuristic cost (exit 0 when any fits).")
    top: int = typer.Option(10, "--top", help="How many layouts --search shows.")
    json_path: Optional[str] = _opt(None, "Write the plan as JSON to this path ('-' = stdout).", "--json")
    explain: bool = typer.Option(False, "--explain", help="Show every formula with its source.")
    list_presets: bool = typer.Option(False, "--list-presets", help="List the model presets and exit.")


@options_command(PlanArgs)
def plan(a: PlanArgs) -> None:
    """Plan a training run: memory per GPU, checkpoint size and write time, compute, layouts.

    Give no layout (none of --tp, --pp, --dp, --zero, --fsdp and the distributed optimizer) and the plan
    searches the layouts that fit and plans the best one, saying so; give degrees to plan exactly that
    layout.  Exit 0 when the planned layout fits or is tight (with --search: when any layout fits), 1 when
    none does, 2 on bad input.

    Examples:

    \b
      trainready plan --preset dense-500b --gpus 5120 --gpu B200 --tokens 10T
      trainready plan --preset llama3-70b --gpus 64 --global-batch 512 --search
      # an exact layout (Megatron: TP within a node, PP across nodes):
      trainready plan --preset dense-500b --gpus 5120 --tp 8 --pp 16 --sp \\
          --distributed-optimizer --global-batch 2560 --gpu H200
      # the ZeRO paper's example (Rajbhandari et al. 2020, Figure 1):
      trainready plan --params 7.5B --dp 64 --zero 2 --gpu-mem-gib 32 \\
          --peak-tflops 125
      trainready plan --preset gpt3-175b --tp 8 --pp 8 --dp 1 --explain
    """
    from trainready.plan.search import HOLDABLE

    if a.list_presets:
        raise typer.Exit(_list_presets())
    check_out_path(a.json_path)
    got = _inputs(a)
    result, found = _plan_and_search(got.inp, got.given, a.do_search, got.mfu_kind, got.sources)
    held = tuple(h.replace("_", "-") for h in HOLDABLE if h in got.given) + (
        ("distributed optimizer",) if a.dist_opt else ())
    raise typer.Exit(_report(result, found, held if a.do_search else None, a.top, a.json_path, a.explain))


def _list_presets() -> int:
    from trainready.plan import model as pm

    for name, spec in pm.PRESETS.items():
        typer.echo(f"{name:<14} {spec.total_params:>20,} params")
    for name in ("reference-tiny", "reference-small"):
        typer.echo(f"{name:<14} {pm.preset(name).total_params:>20,} params  (trainready.workload.model.GPT)")
    return 0


@dataclass(frozen=True)
class Inputs:
    """The planner's input from --file and the flags, which layout choices the user made, and where the MFU and
    the GPU figures came from."""

    inp: Any  # trainready.plan.inputs.PlanInput
    given: set[str]
    mfu_kind: str
    sources: tuple[str, ...]


def _inputs(a: PlanArgs) -> Inputs:
    from trainready.plan import model as pm
    from trainready.plan.inputs import PlanInput
    from trainready.util.strict import load_dataclass, read_toml

    raw = read_toml(a.file, "TOML plan file") if a.file else {}
    inp = load_dataclass(PlanInput, raw, a.file) if a.file else PlanInput()
    model = _model(a, inp.model)
    zero = a.zero
    if a.fsdp is not None:
        fs = {"full": 3, "grad-op": 2, "none": 0}
        if a.fsdp not in fs or (zero is not None and zero != fs[a.fsdp]):
            raise UsageError(f"--fsdp '{a.fsdp}': expected full, grad-op or none (and no conflicting --zero)")
        zero = fs[a.fsdp]
    tok = parse_count(a.tokens, "--tokens")
    mfu, mfu_kind, mfu_line = _mfu(a.mfu, a.mfu_from)
    gpu, per_node, spec_line = _spec_gpu(a.spec, a.gpu, a.gpu_mem_gib, a.peak_tflops)
    inp = PlanInput(
        model,
        pm.override(inp.parallel, tp=a.tp, pp=a.pp, cp=a.cp, dp=a.dp, gpus=a.gpus, zero=zero, sp=a.sp,  # type: ignore[arg-type]
                    distributed_optimizer=a.dist_opt, gpus_per_node=per_node),
        pm.override(inp.training, micro_batch=a.micro_batch, global_batch=a.global_batch, precision=a.precision,  # type: ignore[arg-type]
                    recompute=a.recompute, attention=a.attention, tokens=tok, mfu=mfu),
        pm.override(inp.hardware, gpu=gpu, gpu_mem_gib=a.gpu_mem_gib, peak_tflops=a.peak_tflops,  # type: ignore[arg-type]
                    storage_gbps=a.storage_gbps, ckpt_interval_min=a.ckpt_interval_min, runtime_gib=a.runtime_gib,
                    fragmentation=a.fragmentation, headroom=a.headroom),
    )
    given = {k for k, v in (("tp", a.tp), ("pp", a.pp), ("dp", a.dp), ("zero", zero),
                            ("distributed_optimizer", a.dist_opt), ("sp", a.sp), ("cp", a.cp),
                            ("micro_batch", a.micro_batch), ("recompute", a.recompute))
             if v is not None} | set(raw.get("parallel", {})) | set(raw.get("training", {}))
    sources = tuple(x for x in (spec_line and _spec_figures(spec_line, inp), mfu_line) if x)
    return Inputs(inp, given, mfu_kind, sources)


def _model(a: PlanArgs, model: Any) -> Any:
    """The model: --preset (else the file's), with --params and the shape flags over it; --params alone is a
    count-only model."""
    from trainready.plan import model as pm

    model = pm.preset(a.preset) if a.preset else model
    n = parse_count(a.params, "--params")
    if n is not None and not float(n).is_integer():
        raise UsageError(f"--params '{a.params}': expected a whole number of parameters")
    if n is not None and n < 0:
        raise UsageError(f"--params '{a.params}': expected a number >= 0")
    shape_given = any(v is not None for v in (a.layers, a.hidden, a.heads, a.vocab, a.seq_len))
    if n is not None and not shape_given and not a.preset:
        return pm.ModelSpec(name="custom", params=int(n))
    return pm.override(model, params=int(n) if n is not None else None, layers=a.layers, hidden=a.hidden,
                       heads=a.heads, kv_heads=a.kv_heads, ffn=a.ffn, vocab=a.vocab, seq_len=a.seq_len,
                       gated_mlp=a.gated_mlp, dropout=a.dropout)


def _report(result: Any, found: list[Any], held: tuple[str, ...] | None, top: int, json_path: str | None,
            explain: bool) -> int:
    """Print the plan (and, with --search, i.e. `held` not None, the ranked layouts), write --json: the exit code."""
    from trainready.plan.render import print_plan, print_search
    from trainready.plan.search import COST_NOTE

    do_search = held is not None
    console = Console(stderr=json_path == "-", width=_width())
    print_plan(result, console, explain)
    shown = found[:top] if top > 0 else found
    if held is not None:
        print_search(shown, len(found), held, console)
    if do_search and found and result.memory.verdict == "does not fit":
        console.print(f"the layout given does not fit; {len(found):,} other layouts do (above)", highlight=False)
    if json_path:
        doc = result.to_json()
        if do_search:
            doc["search"] = [c.to_json() for c in shown]
            doc["search_fit_total"] = len(found)
            doc["search_cost"] = COST_NOTE
        write_json_doc(doc, json_path, console, "plan")
    fits = bool(found) if (do_search or result.layout.chosen_by == "search") else result.memory.verdict != "does not fit"
    return 0 if fits else 1


def _width() -> int | None:
    """COLUMNS when set (the tables fit it); else the terminal's; 200 when piped (log files)."""
    import os

    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    return None if sys.stdout.isatty() else 200


def _plan_and_search(inp: Any, given: set[str], do_search: bool, mfu_kind: str, sources: tuple[str, ...]) -> tuple[Any, list[Any]]:
    """The plan — of the layout given, or, when no degree is given, of the best layout the search finds — and
    the layouts that fit (searched when asked or when choosing). `given`: the degrees the user set."""
    from dataclasses import replace

    from trainready.plan.advice import departure
    from trainready.plan.inputs import validate
    from trainready.plan.planner import Layout, make_plan
    from trainready.plan.search import HOLDABLE, choose

    hold = frozenset(h for h in HOLDABLE if h in given)
    auto = not given & {"tp", "pp", "dp", "zero", "distributed_optimizer"}
    implied = not inp.training.global_batch
    if auto:
        chosen, found = choose(inp, hold)
        plain = validate(replace(inp, parallel=replace(inp.parallel, sp=False)))  # where the global batch came from
        p, b = plain.parallel, plain.training.micro_batch
        note = (f"b·dp of plain data parallelism = {b}·{p.dp:,} (--global-batch not given; held while the layout "
                "was searched)") if implied else ""
        departs = departure(found[0], found, chosen.model.total_params, chosen.training.global_batch) if found else ""
        return make_plan(chosen, mfu_kind, sources, Layout("search", len(found), note, departs)), found
    result = validate(inp)
    p, b = result.parallel, result.training.micro_batch
    note = f"b·dp = {b}·{p.dp:,} (--global-batch not given)" if implied else ""
    found = choose(inp, hold)[1] if do_search else []
    return make_plan(result, mfu_kind, sources, Layout("given", len(found) if do_search else -1, note)), found


def _mfu(mfu: float | None, mfu_from: str | None) -> tuple[float | None, str, str]:
    """(MFU, 'assumed'|'measured', source line): --mfu is assumed, --mfu-from reads a node report."""
    if mfu_from is None:
        return mfu, "assumed", ""
    if mfu is not None:
        raise UsageError("--mfu and --mfu-from: give one (an assumed or a measured MFU), not both")
    from trainready.plan.measured import read_mfu

    measured = read_mfu(mfu_from)
    return measured.value, "measured", measured.describe()


def _spec_gpu(spec: str | None, gpu: str | None, mem: float | None, peak: float | None) -> tuple[str | None, int | None, str]:
    """(GPU name, GPUs per node, source line) from --spec; --gpu/--gpu-mem-gib/--peak-tflops still override."""
    if spec is None:  # both figures given and no name: a custom GPU, not the table's default H100
        return (gpu if gpu is not None or not (mem and peak) else "custom"), None, ""
    from trainready.plan.gpus import from_spec, known, lookup

    model, count, _ = from_spec(spec)
    if gpu is not None:
        return gpu, count, f"GPU from --gpu {gpu} (overrides spec {spec}'s gpu.model '{model}'); {count} GPUs per node from the spec"
    if not (mem and peak):
        try:
            lookup(model)
        except UsageError:
            raise UsageError(f"--spec {spec}: GPU model '{model}' (gpu.model) is not in the hardware table (known: "
                             f"{', '.join(known())}); give --gpu-mem-gib and --peak-tflops") from None
    return model, count, f"GPU from spec {spec}: gpu.model '{model}', {count} GPUs per node"


def _spec_figures(line: str, inp: Any) -> str:
    """The source line plus the figures the plan will use (flags over the table)."""
    from trainready.plan.planner import gpu_figures

    name, capacity, peak = gpu_figures(inp)
    hw = inp.hardware
    by = "flags" if hw.gpu_mem_gib and hw.peak_tflops else "hardware table" + (" + flags" if hw.gpu_mem_gib or hw.peak_tflops else "")
    return f"{line} → {name}: {capacity / 2**30:,.1f} GiB, {peak:,.1f} TFLOP/s dense BF16 ({by})"


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
