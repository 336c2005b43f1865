"""The sysfs tree builder for tests (src/trainready/fabric/sample.py, which the self-test uses too)."""

from trainready.fabric.sample import (HDR, NDR, SWITCH_BUS, Nic, default_nics, gpu_pci, hgx_tree,  # noqa: F401
                                      nic_pci, pci_device, set_port, write_nic)
