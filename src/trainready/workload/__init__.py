"""The reference workload: a small decoder-only transformer and its training step."""
