"""Evaluation: walk tasks checkpoint by checkpoint (contract sections 3-4)."""
