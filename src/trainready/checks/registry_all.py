"""Import every check module in this package so that each registers itself.

Discovery is by module, so adding a check is adding a file; a name registered
twice still fails loudly (`DuplicateCheckError`).
"""

from __future__ import annotations

import importlib
import pkgutil

_NOT_CHECKS = {"registry_all", "__init__"}


def import_all() -> None:
    """Import each check module; one that fails to import becomes an `error` result,
    never a crash of the whole run (DuplicateCheckError still propagates)."""
    import trainready.checks as pkg
    from trainready.errors import DuplicateCheckError

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name not in _NOT_CHECKS and not info.name.startswith("_"):
            try:
                importlib.import_module(f"trainready.checks.{info.name}")
            except DuplicateCheckError:
                raise
            except Exception as exc:  # noqa: BLE001
                _register_broken(info.name, exc)


def _register_broken(module: str, exc: Exception) -> None:
    from trainready.records import Outcome, Status
    from trainready.suite.base import Check, register

    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    msg = f"check module trainready.checks.{module} failed to import: {type(exc).__name__}: {first}"

    class Broken(Check):
        name = module
        title = f"{module} (failed to import)"

        def run(self, ctx):  # type: ignore[no-untyped-def]
            return Outcome(Status.ERROR, msg, remedy="Reinstall trainready; report this as a bug.")

    register(Broken)


import_all()
