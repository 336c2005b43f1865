"""All node checks.  `REGISTRY` and `select` register every check on first use (PEP 562 module
`__getattr__`), so a caller that needs only a few checks (`node --health-check`) imports only their
modules: `from trainready.suite.base import ...` plus the modules (`only()` below), never the whole
set and its imports (torch.distributed.checkpoint and sympy took ~3.4 s of a 1x H200's start-up)."""

from __future__ import annotations

import importlib
from typing import Any

from trainready.suite.base import Check, CheckContext, register

__all__ = ["REGISTRY", "Check", "CheckContext", "register", "select", "only"]

def only(names: tuple[str, ...]) -> list[type[Check]]:
    """Import just the modules of these checks (each check's module is named after it) and return their classes
    in run order."""
    from trainready.suite import base

    for n in names:
        importlib.import_module(f"trainready.checks.{n}")
    return sorted((base.REGISTRY[n] for n in names), key=lambda c: (c.order, c.name))


def __getattr__(name: str) -> Any:
    if name in ("REGISTRY", "select"):
        from trainready.checks import registry_all  # noqa: F401  (registers every check module)
        from trainready.suite import base

        return getattr(base, name)
    raise AttributeError(f"module 'trainready.checks' has no attribute {name!r}")
