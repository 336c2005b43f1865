"""The one exceptions module.

Every error a user can cause by their input derives from `UsageError` and is
reported by the CLI as a single line with exit code 2 (no traceback).  Errors
in recorded evidence (a corrupt checkpoint, a malformed token file) are
`DataError`s: also one line, but they make the check that met them fail.
"""

from __future__ import annotations


class TrainreadyError(Exception):
    """Base class of every error trainready raises on purpose."""

    exit_code: int = 1


class UsageError(TrainreadyError):
    """Bad command-line input, spec or path: exit code 2."""

    exit_code = 2


class ConfigError(UsageError):
    """A spec/config file is missing, malformed, has an unknown key or a wrong type.

    The message always names the file, the key and what was expected.
    """

    def __init__(self, path: str, key: str | None, expected: str) -> None:
        self.path = path
        self.key = key
        self.expected = expected
        where = f"{path}: key '{key}'" if key else str(path)
        super().__init__(f"{where}: {expected}")


class DuplicateCheckError(TrainreadyError):
    """A check name was registered twice (a programming error, caught at import)."""


class DataError(TrainreadyError):
    """A data or checkpoint file is not what it claims to be (file + found vs expected)."""


class CheckpointError(DataError):
    """A checkpoint is missing, half-written or fails its checksums."""


class CheckpointWriteError(CheckpointError):
    """Saving a checkpoint failed (disk full, quota, I/O error); names the path; nothing was published."""


class RankFailure(TrainreadyError):
    """One or more distributed ranks failed, hung or died; names them."""

    def __init__(self, message: str, ranks: tuple[int, ...]) -> None:
        self.ranks = ranks
        super().__init__(message)


# Import name → the distribution pip installs it from (pyproject.toml's dependencies).
PIP_NAMES = {"typer": "typer", "rich": "rich", "torch": "torch", "numpy": "numpy", "pynvml": "nvidia-ml-py",
             "tomli": "tomli", "click": "typer"}


def missing_dependency(exc: ModuleNotFoundError) -> str | None:
    """One line for a third-party package that is not installed (running from a checkout with
    `PYTHONPATH=src` on a host without trainready's dependencies); None for trainready's own modules."""
    top = (exc.name or "").split(".")[0]
    if not top or top == "trainready":
        return None
    import sys

    pip = PIP_NAMES.get(top, top)
    return (f"trainready: error: the Python package '{pip}' is not installed (python: {sys.executable}); install it "
            f"with `pip install {pip}`, or every dependency with `pip install .` in the repository")


class SlurmError(TrainreadyError):
    """A Slurm command is missing, refused a request or failed: one line naming the command and Slurm's words.

    Exit 2: like a usage error, it is about where trainready runs (no Slurm here, a bad partition), not a verdict."""

    exit_code = 2
