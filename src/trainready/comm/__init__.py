"""Collective communication: correctness and bandwidth like nccl-tests (`trainready comm`)."""
