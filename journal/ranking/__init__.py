"""Ranking: search and relate by words, by meaning or both fused, corrections, and the prompt context."""

__all__: list[str] = []
