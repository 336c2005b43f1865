"""Checkpoints: DCP model/optimizer shards + per-rank train state, sha256 manifest, atomic `latest`."""
