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


class GpuUnusable(TrainreadyError):
    """The spec expects GPUs (gpu.count > 0) but CUDA cannot give them to this process.

    A check that meets it FAILS with this message (never falls back to the CPU): the text names
    torch's own reason, CUDA_VISIBLE_DEVICES and the driver as NVML sees it (devices/world.py)."""

    remedy = ("Run where this process sees the GPUs (fix CUDA_VISIBLE_DEVICES / the container's GPU request, "
              "a CUDA build of torch matching the driver; `nvidia-smi` and `trainready env` show both), or judge "
              "a CPU machine with a CPU spec (example:cpu-default).")


class Cancelled(TrainreadyError):
    """A launch was asked for after its check's deadline or an interrupt stopped it (ranks/live.py)."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (util/signals.py). A BaseException, like KeyboardInterrupt, so no
    `except Exception` swallows it; the command stops every rank, removes or names its scratch, prints
    one line and exits 128 + the signal number (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = signum
        self.signame = signal.Signals(signum).name
        self.during = ""  # what was running: a check's name, with its ranks' stages (set on the way out)
        self.partial: object = None  # the partial Report, when a runner had one (runner.run_checks)
        self.notes: list[str] = []  # what the command did about it ("partial record at …", "scratch … removed")
        super().__init__(f"interrupted by {self.signame}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class SlurmError(TrainreadyError):
    """A Slurm command is missing, refused a request or failed: one line naming the command and Slurm's words.

    Exit 2: like a usage error, it is about where trainready runs (no Slurm here, a bad partition), not a verdict."""

    exit_code = 2


class ControllerDown(SlurmError):
    """slurmctld did not answer a Slurm command (down, restarting, failing over, or munge refusing for a moment).

    Not a verdict on anything: a fleet command waits for the controller (cluster/control/outage.py) before it gives up.
    `unsent`: the request never reached a controller (no connection, no credential), so sending it again cannot
    do anything twice."""

    def __init__(self, message: str, detail: str, unsent: bool) -> None:
        self.detail = detail
        self.unsent = unsent
        super().__init__(message)


class ImageError(TrainreadyError):
    """An image import or distribution failed (the registry, enroot or a node said why): exit 1, one line."""
