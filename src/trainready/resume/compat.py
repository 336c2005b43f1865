"""Checkpoint compatibility across environments (images, torch versions): the parent side.

`trainready resume --save-only DIR` (old image): train to K, save, record the continuation K→N
and a manifest of the environment (`compat.json`, schema trainready.compat/1).
`trainready resume --load-from DIR` (new image): compare the checkpoint's structure with what this
environment expects (DCP metadata version, every tensor's dtype and shape, missing or extra
tensors, the RNG state format); if it fits, load it, continue K→N and compare with the saver's
continuation, bitwise or within the declared tolerance.  Every difference is named.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, Mapping

from trainready.errors import UsageError
from trainready.records import Metric, Outcome, Status, Threshold
from trainready.resume.options import CompatOptions
from trainready.spec.model import NodeSpec
from trainready.util.atomic import atomic_write_json
from trainready.util.listing import first_of

SCHEMA = "trainready.compat/1"
MANIFEST = "compat.json"
PLANTS = ("dtype", "missing", "rng")


def planted(faults: Mapping[str, str]) -> dict[str, str]:
    """The compat plants among `faults` (`compat.NAME=VALUE`), keyed by NAME."""
    return {k: v for k in PLANTS if (v := faults.get(f"compat.{k}") or "")}


def _launch(role: str, man: dict[str, Any], directory: Path, world: int, backend: str, tol: tuple[float, float],
            plants: dict[str, str], data: str) -> Any:
    from trainready.ranks.launch import launch
    from trainready.workload.loop import CUBLAS_WORKSPACE

    env = {"CUBLAS_WORKSPACE_CONFIG": CUBLAS_WORKSPACE} if man["train"].get("deterministic", True) else {}
    return launch("trainready.resume.compat_worker:compat_rank", world, backend,
                  {"role": role, "train": man["train"], "data": data, "dtype": man.get("dtype"), "directory": str(directory),
                   "checkpoint_step": man["checkpoint_step"], "atol": tol[0], "rtol": tol[1], "plants": plants},
                  timeout_s=600.0, env=env, threads_per_rank=1 if backend == "gloo" else None)


def save_only(spec: NodeSpec, opts: CompatOptions, plants: dict[str, str]) -> Outcome:
    """Old environment: train to K in `opts.directory`, save, record the continuation and the manifest."""
    from trainready.ckpt.load import resolve_latest
    from trainready.resume.compat_env import environment, read_checkpoint_meta, rng_format
    from trainready.resume.setup import prepare

    directory = opts.directory
    pc = prepare(spec.resume, dataclasses.replace(opts.resume, directory=directory), {}, directory)
    train = pc.train.to_json()
    man: dict[str, Any] = {"schema": SCHEMA, "train": train, "checkpoint_step": pc.checkpoint_step, "dtype": pc.dtype}
    res = _launch("save", man, directory, pc.world_size, pc.backend, (pc.tolerance.atol, pc.tolerance.rtol), plants, pc.data)
    if not res.ok:
        return Outcome(Status.FAIL, f"saving run failed on {pc.world_size} {pc.backend} rank(s): {res.describe()}",
                       remedy="The named rank's error is above; rerun with TRAINREADY_DEBUG=1.")
    first = res.values[0]
    version, entries = read_checkpoint_meta(resolve_latest(directory / "ckpt"))
    data = Path(pc.data)
    man.update(
        train={**train, "precision": first["precision"]},  # as resolved here (bf16 on GPU): the loader must match it
        world_size=pc.world_size, backend=pc.backend, steps=pc.train.steps,
        data=str(data.relative_to(directory)) if data.is_relative_to(directory) else str(data),
        environment=environment("cuda" if pc.backend == "nccl" else "cpu"), dcp_version=version, entries=entries,
        rng_format=rng_format(first["rng_state"]), tolerance={"atol": pc.tolerance.atol, "rtol": pc.tolerance.rtol},
        reference_losses=[{str(s): v for s, v in r["losses"].items() if int(s) > pc.checkpoint_step} for r in res.values],
        planted=plants,
    )
    atomic_write_json(directory / MANIFEST, man)
    env = man["environment"]
    return Outcome(Status.PASS, f"saved step {pc.checkpoint_step} and the continuation to step {pc.train.steps} in "
                   f"{directory} (torch {env['torch']}, {env['device']}, DCP metadata {version}, {len(entries)} entries); "
                   f"load it in the other environment with `trainready resume --load-from {directory}`",
                   details={"manifest": str(directory / MANIFEST), "environment": env})


def read_manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST
    if not path.is_file():
        raise UsageError(f"--load-from {directory}: no {MANIFEST} (expected a directory written by `trainready resume --save-only`)")
    try:
        man = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--load-from {path}: unreadable ({str(exc).splitlines()[0]})") from None
    missing = [k for k in ("train", "checkpoint_step", "world_size", "entries", "rng_format", "reference_losses")
               if not isinstance(man, dict) or k not in man]
    if not isinstance(man, dict) or man.get("schema") != SCHEMA or missing:
        raise UsageError(f"--load-from {path}: expected a '{SCHEMA}' manifest with {', '.join(missing) or 'its keys'}")
    return man  # type: ignore[no-any-return]


def environment_rows(saved: dict[str, Any], here: dict[str, Any]) -> list[dict[str, Any]]:
    from trainready.resume.compat_env import row

    return [row(k, str(saved.get(k)), str(here.get(k)), True, "differs" if saved.get(k) != here.get(k) else "")
            for k in ("torch", "torch_cuda", "python", "numpy", "device", "device_name")]


def load_from(opts: CompatOptions) -> Outcome:
    """New environment: check the saved checkpoint's structure here, load it, continue and compare."""
    from trainready.ckpt.load import resolve_latest
    from trainready.errors import CheckpointError
    from trainready.resume.compat_env import environment, expected_entries, read_checkpoint_meta, row, structure_rows, \
        rng_format_here
    from trainready.resume.setup import device_world

    directory = opts.directory
    man = read_manifest(directory)
    world, backend = device_world(int(man["world_size"]), opts.resume.cpu)
    here = environment("cuda" if backend == "nccl" else "cpu")
    rows = environment_rows(man.get("environment", {}), here)
    try:
        step_dir = resolve_latest(directory / "ckpt")
    except CheckpointError as exc:
        rows.append(row("checkpoint", f"step {man['checkpoint_step']}", str(exc), False))
        return _verdict(rows, man, here, None)
    try:
        version, read = read_checkpoint_meta(step_dir)
    except Exception as exc:  # noqa: BLE001 - whatever this torch raises reading the metadata is the finding
        rows.append(row("DCP metadata", f"version {man.get('dcp_version')}", f"unreadable by torch {here['torch']}: "
                        f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}", False))
        return _verdict(rows, man, here, None)
    rows += structure_rows(man, version, read, expected_entries(man["train"]), man["rng_format"],
                           rng_format_here(list(range(world)) if backend == "nccl" else []))
    if not all(r["ok"] for r in rows):
        return _verdict(rows, man, here, None)
    saved = man["tolerance"]
    tol = (float(saved["atol"] if opts.atol is None else opts.atol), float(saved["rtol"] if opts.rtol is None else opts.rtol))
    data = opts.resume.data or str(directory / man["data"])  # an absolute path stays as it is
    res = _launch("load", man, directory, world, backend, tol, {}, str(data))
    if not res.ok:
        rows.append(row("load and continue", "", res.describe(), False))
        return _verdict(rows, man, here, None)
    return _verdict(rows, man, here, res.values, tol)


def _verdict(rows: list[dict[str, Any]], man: dict[str, Any], here: dict[str, Any], ranks: list[dict[str, Any]] | None,
             tol: tuple[float, float] = (0.0, 0.0)) -> Outcome:
    from trainready.resume.compat_rows import continuation_rows

    metrics: list[Metric] = []
    if ranks is not None:
        more, worst = continuation_rows(ranks, man, tol)
        rows += more
        bound = tol[0] if tol[1] == 0 else math.inf
        metrics = [Metric.of("compat_max_abs_delta", v, "1", Threshold("<=", bound, "1", "declared tolerance (atol)"),
                             component=k) for k, v in worst.items()]
    bad = [r for r in rows if not r["ok"]]
    saved_env = man.get("environment", {})
    what = (f"checkpoint saved by torch {saved_env.get('torch')} ({saved_env.get('device')}) in torch {here['torch']} "
            f"({here['device']})")
    details = {"table": rows, "environment_saved": saved_env, "environment_here": here, "planted_at_save": man.get("planted", {})}
    if bad:
        named = first_of([f"{r['component']}: {r['note'] or 'differs'} ({r['saved']} → {r['here']})" for r in bad], 4)
        return Outcome(Status.FAIL, f"{what}: {named}", tuple(metrics), details=details,
                       remedy="The named difference stops this environment resuming the old image's checkpoints: keep "
                       "the old image for this run, convert the checkpoint, or fix the model/optimizer/RNG code.")
    mode = "bitwise" if tol == (0.0, 0.0) else f"within atol={tol[0]:g}, rtol={tol[1]:g}"
    return Outcome(Status.PASS, f"{what}: loaded step {man['checkpoint_step']} and continued to step {man['steps']}, "
                   f"{mode} equal to the saver's continuation", tuple(metrics), details=details)
