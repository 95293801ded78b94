"""Ring AllReduce busbw on the default fabric with random vs hash-orthogonal source
ports, and the share of random port draws that collide (see bench/port_modes.py for how)."""

from __future__ import annotations

from bench.port_modes import allreduce_port_modes, port_spread


def run() -> dict[str, float]:
    return {**port_spread(), **allreduce_port_modes()}
