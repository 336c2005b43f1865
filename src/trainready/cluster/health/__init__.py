"""The node's own health check for Slurm's HealthCheckProgram: the passive half (`passive.py`: NVML and the kernel
log, no torch) and `--active` with the health check's drain (`active.py`)."""
