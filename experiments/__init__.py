"""Experiments: the same trace-driven training job under the four configurations the
Astral design argues for (stock, rail-aware order, hash-orthogonal ports, GOR), with the
numbers that tell them apart, and a cable-failure scenario (docs/experiments.md)."""
