"""The fabric: RDMA ports from sysfs, the PCIe paths between GPUs and NICs, what NCCL will use, NVLink and the
NVSwitch fabric through NVML, and the services that manage them. Facts here; the judgment in `fabric/judge/`."""
