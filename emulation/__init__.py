"""Emulated time and fidelity: the clock every timed part of a fabric reads, and the
checks that say whether a run's numbers came from the modelled network (docs/fabric.md)."""
