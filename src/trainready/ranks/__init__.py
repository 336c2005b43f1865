"""Launching and supervising ranks: local multi-process groups with deadlines."""

from trainready.ranks.launch import LaunchResult, RankContext, RankOutcome, launch

__all__ = ["LaunchResult", "RankContext", "RankOutcome", "launch"]
