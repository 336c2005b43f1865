"""trainready: acceptance tests for LLM-pretraining machines and fleets."""

__version__ = "0.1.0"
