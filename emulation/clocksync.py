"""How far another machine's CLOCK_MONOTONIC is from this one's, for a fabric that
spans machines (Mininet cluster mode, `topo.cluster`).

The emulation clock is CLOCK_MONOTONIC since an origin, divided by the dilation; one
machine's namespaces share that clock, but each machine's starts at its own boot. So a
fabric over several machines gives each the origin in its own clock: this machine's
origin plus the other's offset (`EmulationClock.shifted`). The offset is measured as
NTP and Cristian's algorithm do: ask the other machine for its clock between two
readings of ours, assume the answer was read half way, keep the exchange with the
shortest round trip; half that round trip bounds the error. Monotonic clocks also
drift apart (tens of ppm unless NTP/PTP disciplines them): the offset holds for the
start of a run, which is why docs/fabric.md asks for time sync on the servers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

# What the other machine runs: one CLOCK_MONOTONIC reading (ns) per line it is sent.
PROBE = "import sys, time\nfor _ in sys.stdin:\n    print(time.monotonic_ns(), flush=True)\n"
# Exchanges per measurement: the shortest round trip of these is kept.
ROUNDS = 16


@dataclass(frozen=True)
class Offset:
    """The other clock minus ours (ns), within +- ``error_ns``."""

    ns: int
    error_ns: int


def measure(ask: Callable[[], int], rounds: int = ROUNDS,
            now: Callable[[], int] = time.monotonic_ns) -> Offset:
    """The offset of the clock that ``ask()`` reads (one reading per call) from
    ``now``'s, from the exchange with the shortest round trip of ``rounds``."""
    best: Offset | None = None
    for _ in range(rounds):
        sent = now()
        theirs = ask()
        back = now()
        sample = Offset(theirs - (sent + back) // 2, (back - sent + 1) // 2)
        if best is None or sample.error_ns < best.error_ns:
            best = sample
    assert best is not None, "rounds must be at least 1"
    return best
