"""GOR's detect -> moved loop time on the default fabric: two elephant flows forced onto
one uplink, GOR moves one (see bench/gor_scenario.py). Needs root."""

from __future__ import annotations

from bench.gor_scenario import benchmark


def run() -> dict[str, float]:
    return benchmark()
