"""Load a spec strictly; ship examples."""

from __future__ import annotations

import dataclasses
from importlib import resources
from pathlib import Path
from typing import Any

from trainready.errors import ConfigError, UsageError
from trainready.spec.model import NodeSpec
from trainready.util.strict import load_dataclass, read_toml

EXAMPLES = ("cpu-default", "h200-8x", "b200-reference")


def example_path(name: str) -> Path:
    if name not in EXAMPLES:
        raise UsageError(f"unknown example spec '{name}' (expected one of: {', '.join(EXAMPLES)})")
    return Path(str(resources.files("trainready.spec").joinpath("examples", f"{name}.toml")))


def load_spec(path: str | Path | None) -> tuple[NodeSpec, str]:
    """Return (spec, where-it-came-from). `None` → the CPU default example.

    A value of the form ``example:NAME`` loads a shipped example.
    """
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
    if spec.comm.backend not in ("auto", "nccl", "gloo"):
        raise ConfigError(path, "comm.backend", f"expected one of auto, nccl, gloo, got '{spec.comm.backend}'")
    if not 0 < spec.comm.min_fraction <= 1:
        raise ConfigError(path, "comm.min_fraction", f"expected 0 < x <= 1, got {spec.comm.min_fraction}")


def spec_to_json(spec: NodeSpec) -> dict[str, Any]:
    return dataclasses.asdict(spec)
