"""Cirrus: a replay-based benchmark for LLM customer-service agents."""

__version__ = "0.1.0"
