"""Import every check module in this package so that each registers itself.

Discovery is by module, so adding a check is adding a file; a name registered
twice still fails loudly (`DuplicateCheckError`).
"""

from __future__ import annotations

import importlib
import pkgutil

_NOT_CHECKS = {"base", "registry_all", "__init__"}


def import_all() -> None:
    import trainready.checks as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name not in _NOT_CHECKS and not info.name.startswith("_"):
            importlib.import_module(f"trainready.checks.{info.name}")


import_all()
