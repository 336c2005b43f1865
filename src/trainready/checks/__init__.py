"""All node checks. Importing this package registers every check once."""

from trainready.checks.base import REGISTRY, Check, CheckContext, register, select

# Each module registers its check(s) on import; the order here does not matter
# (Check.order does).
from trainready.checks import registry_all  # noqa: F401,E402

__all__ = ["REGISTRY", "Check", "CheckContext", "register", "select"]
