"""One module per CLI command; each exposes `register(app)`. Discovered by module."""

from __future__ import annotations

import importlib
import pkgutil

import typer

# Shown in --help in this order; commands not listed follow alphabetically.
ORDER = ("node", "env", "comm", "resume", "plan", "spec")


def register_all(app: typer.Typer) -> None:
    import trainready.commands as pkg

    names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name not in ("common",) and not m.name.startswith("_")]
    names.sort(key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    for name in names:
        mod = importlib.import_module(f"trainready.commands.{name}")
        if hasattr(mod, "register"):
            mod.register(app)
