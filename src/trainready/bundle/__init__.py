"""Handoff bundles: everything a colleague needs to re-run and judge an environment, with checksums."""
