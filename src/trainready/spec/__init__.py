"""What a node *should* be: the spec every machine is held to."""

from trainready.spec.load import default_spec, example_path, load_spec
from trainready.spec.model import (
    CommSpec,
    ComputeSpec,
    FleetSpec,
    GpuSpec,
    NodeSpec,
    ResumeSpec,
    SoftwareSpec,
)

__all__ = [
    "CommSpec",
    "ComputeSpec",
    "FleetSpec",
    "GpuSpec",
    "NodeSpec",
    "ResumeSpec",
    "SoftwareSpec",
    "default_spec",
    "example_path",
    "load_spec",
]
