"""Load a spec strictly; ship examples."""

from __future__ import annotations

import dataclasses
import re
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from trainready.errors import ConfigError, UsageError
from trainready.spec.keys import check_table, op_tables
from trainready.spec.model import CompareSpec, NodeSpec
from trainready.util.strict import load_dataclass, read_toml

EXAMPLES = ("cpu-default", "h200-8x", "b200-reference", "local-slurm")


def example_path(name: str) -> Path:
    if name not in EXAMPLES:
        raise UsageError(f"unknown example spec '{name}' (expected one of: {', '.join(EXAMPLES)})")
    return Path(str(resources.files("trainready.spec").joinpath("examples", f"{name}.toml")))


def load_spec(path: str | Path | None) -> tuple[NodeSpec, str]:
    """Return (spec, where-it-came-from). `None` → the CPU default example.

    A value of the form ``example:NAME`` loads a shipped example; ``auto`` the automatic spec (spec/auto.py:
    the GPUs NVML sees, else the CPU default).
    """
    if path == "auto":
        from trainready.spec.auto import auto_spec

        found, source = auto_spec()
        return (found if found is not None else load_spec(None)[0]), source
    if path is None:
        path = example_path("cpu-default")
    elif isinstance(path, str) and path.startswith("example:"):
        path = example_path(path.split(":", 1)[1])
    data = read_toml(path)
    spec = load_dataclass(NodeSpec, data, str(path))
    _validate(spec, str(path))
    return spec, str(path)


def default_spec() -> NodeSpec:
    return load_spec(None)[0]


def _validate(spec: NodeSpec, path: str) -> None:
    if spec.gpu.count < 0:
        raise ConfigError(path, "gpu.count", f"expected an integer >= 0, got {spec.gpu.count}")
    r = spec.resume
    if not 0 < r.checkpoint_step < r.steps:
        raise ConfigError(path, "resume.checkpoint_step", f"expected 0 < checkpoint_step < steps ({r.steps}), got {r.checkpoint_step}")
    for key in ("atol", "rtol"):
        if getattr(r, key) < 0:
            raise ConfigError(path, f"resume.{key}", "expected a number >= 0")
    _validate_ranges(spec, path)
    if spec.comm.backend not in ("auto", "nccl", "gloo"):
        raise ConfigError(path, "comm.backend", f"expected one of auto, nccl, gloo, got '{spec.comm.backend}'")
    if not 0 < spec.comm.min_fraction <= 1:
        raise ConfigError(path, "comm.min_fraction", f"expected 0 < x <= 1, got {spec.comm.min_fraction}")
    _validate_compare(spec, path)
    from trainready.hostsettings.pins import validate as validate_host

    validate_host(spec, path)
    from trainready.spec.burnin import validate as validate_burnin

    validate_burnin(spec, path)
    from trainready.spec.fabric import validate as validate_fabric

    validate_fabric(spec, path)


def spec_to_json(spec: NodeSpec) -> dict[str, Any]:
    return dataclasses.asdict(spec)


def _validate_ranges(spec: NodeSpec, path: str) -> None:
    """Values that load as the right type but cannot be meant (one line, file + key)."""
    c, m = spec.comm, spec.compute
    checks: list[tuple[str, bool, str]] = [
        ("comm.world_size", c.world_size >= 0, "an integer >= 0 (0 = one rank per GPU)"),
        ("comm.timeout_s", c.timeout_s > 0, "seconds > 0"),
        ("comm.expected_sizes_bytes", len(c.expected_sizes_bytes) == 0 or (
            len(c.expected_sizes_bytes) == 2 and 0 < c.expected_sizes_bytes[0] <= c.expected_sizes_bytes[1]),
         "[] or [low, high] bytes with 0 < low <= high"),
        ("compute.gemm_min_fraction", m.gemm_min_fraction is None or 0 < m.gemm_min_fraction <= 1,
         "a fraction 0 < x <= 1"),
        ("compute.hbm_min_fraction", m.hbm_min_fraction is None or 0 < m.hbm_min_fraction <= 1,
         "a fraction 0 < x <= 1"),
        ("compute.spread_max", m.spread_max is None or 0 <= m.spread_max < 1, "a fraction 0 <= x < 1"),
        ("compute.gemm_tflops_min", m.gemm_tflops_min is None or m.gemm_tflops_min > 0, "TFLOP/s > 0"),
        ("compute.hbm_gbps_min", m.hbm_gbps_min is None or m.hbm_gbps_min > 0, "GB/s > 0"),
        ("gpu.memory_gib_min", spec.gpu.memory_gib_min is None or spec.gpu.memory_gib_min > 0, "GiB > 0"),
        ("resume.ranks", spec.resume.ranks >= 1, "an integer >= 1"),
        ("resume.batch_size", spec.resume.batch_size >= 1, "an integer >= 1 (sequences per rank per step)"),
        ("resume.seed", spec.resume.seed >= 0, "an integer >= 0 (it seeds PCG64 and torch)"),
        ("resume.mode", spec.resume.mode in ("ddp", "fsdp"), f"ddp or fsdp, got '{spec.resume.mode}'"),
        ("gpu.model", spec.gpu.model is None or bool(spec.gpu.model.strip()),
         "a product-name substring such as 'H200' (a blank one matches every GPU; omit the key to not check it)"),
        ("gpu.driver_branch", spec.gpu.driver_branch is None or bool(spec.gpu.driver_branch.strip(" .")),
         "a driver branch such as '580' (omit the key to not check it)"),
        ("fleet.clock_offset_max_s", spec.fleet.clock_offset_max_s > 0, "seconds > 0"),
        ("fleet.nofile_min", spec.fleet.nofile_min >= 0, "an integer >= 0"),
        ("fleet.slow_fraction", 0 < spec.fleet.slow_fraction <= 1, "a fraction 0 < x <= 1"),
        ("fleet.outlier_k", spec.fleet.outlier_k > 0, "a number > 0"),
        ("fleet.storage_wait_s", spec.fleet.storage_wait_s > 0, "seconds > 0"),
        ("fleet.join_s", spec.fleet.join_s > 0, "seconds > 0"),
    ]
    for key, ok, expected in checks:
        if not ok:
            raise ConfigError(path, key, f"expected {expected}")
    sw = spec.software
    for key in ("torch", "cuda", "nccl", "cudnn", "python"):
        v = getattr(sw, key)
        if v is not None and not v.strip():
            raise ConfigError(path, f"software.{key}", "expected a version such as '2.13.0' (omit the key to not pin it)")
    if sw.os and not re.fullmatch(r"\S(.*\S)?", sw.os):
        raise ConfigError(path, "software.os", f"expected NAME VERSION_ID such as 'Ubuntu 24.04', got '{sw.os}'")
    for name, version in sw.packages.items():
        if not name.strip() or not version.strip():
            raise ConfigError(path, f"software.packages.{name}", "expected a package name and a non-empty version")
    digest = spec.software.image_digest
    if digest is not None and not re.fullmatch(r"(?:[^@\s]+@)?sha256:[0-9a-f]{64}", digest):
        raise ConfigError(path, "software.image_digest", f"expected sha256:<64 hex digits> (optionally repo@...), got '{digest}'")

    for table, values in op_tables(spec):  # one validator for every op-keyed table (spec/keys.py)
        check_table(path, table, values)
    for key in c.min_fraction_by_op:
        if key not in c.expected_busbw_gbps:
            raise ConfigError(path, f"comm.min_fraction_by_op.{key}",
                              "expected a key of comm.expected_busbw_gbps (a fraction of what?)")
    _check_mean_fraction(path, "comm.min_fraction_all_ops", c.min_fraction_all_ops, "comm.expected_busbw_gbps",
                         c.expected_busbw_gbps)
    _check_mean_fraction(path, "comm.min_fraction_efficiency", c.min_fraction_efficiency, "comm.expected_efficiency",
                         c.expected_efficiency)


def _check_mean_fraction(path: str, key: str, fraction: float | None, table: str,
                         expected: Mapping[str, float]) -> None:
    """A fraction judged on the geometric mean over ops of figure / expectation: it needs the expectations,
    and 0 < x <= 2 (> 1 is legitimate: busbw expectations are the reference's LOW figures)."""
    if fraction is None:
        return
    if not expected:
        raise ConfigError(path, key, f"expected {table} too (a fraction of what?)")
    if not 0 < fraction <= 2:
        raise ConfigError(path, key, f"expected 0 < x <= 2, got {fraction}")


VERSION_KEYS = ("python", "torch", "cuda", "cudnn", "nccl", "driver", "driver_cuda", "os", "kernel", "image_digest", "packages")


def compare_table(recorded: Any, where: str) -> tuple["CompareSpec", str]:
    """The [compare] table recorded in a record's spec (strictly loaded and validated), else the defaults."""
    from trainready.spec.model import CompareSpec

    if recorded is None:
        return CompareSpec(), "defaults (the baseline record carries no [compare] table)"
    table = load_dataclass(CompareSpec, recorded, where, prefix="spec.compare.")
    _validate_compare(dataclasses.replace(NodeSpec(), compare=table), where)
    return table, f"{where}: its recorded spec's [compare]"


def _validate_compare(spec: NodeSpec, path: str) -> None:
    """[compare]: tolerances >= 0, known directions, known version keys (one line, file + key)."""
    from trainready.spec.model import DIRECTIONS

    c = spec.compare
    if not 0 <= c.rate_rel_tol < 1:
        raise ConfigError(path, "compare.rate_rel_tol", "expected a fraction 0 <= x < 1")
    if not c.time_rel_tol >= 0:
        raise ConfigError(path, "compare.time_rel_tol", "expected a fraction >= 0")
    for i, name in enumerate(c.allow_changes):
        if name.split(".", 1)[0] not in VERSION_KEYS or name.endswith("."):
            raise ConfigError(path, f"compare.allow_changes[{i}]", f"expected one of {', '.join(VERSION_KEYS)} or packages.NAME, got '{name}'")
    for name, tol in c.metrics.items():
        if tol.direction not in DIRECTIONS:
            raise ConfigError(path, f"compare.metrics.{name}.direction", f"expected one of {', '.join(DIRECTIONS)}, got '{tol.direction}'")
        for key in ("rel", "abs"):
            v = getattr(tol, key)
            if v is not None and not v >= 0:
                raise ConfigError(path, f"compare.metrics.{name}.{key}", "expected a number >= 0")
