"""How faithfully an agent kept the emulated time: lateness histograms per NIC.

Two things can make an agent's numbers come from the CPU instead of the modelled
network, and each NIC measures both, in emulated time:

* departures (``tx``): how late each data frame left against its schedule -- the later
  of the NIC's line-rate pacer (previous departure + that frame's serialisation time)
  and the time the frame became sendable (its QP's DCQCN pacer, or the post, ACK or
  timeout that gave the QP work). A frame that leaves before its schedule counts as
  on time, and as ``early`` if by more than the histogram's resolution: a NIC
  catching up after a late wake-up sends a few frames back to back;
* handling (``rx``): how long after its arrival (the kernel's timestamp) each received
  frame was handled -- the delay added to its ACK, its CNP, the next send it enables.

Lateness is kept in frame times (the time an MTU frame takes at line rate) in a fixed
histogram -- 20 linear buckets per frame time up to 4, then 4 per octave -- so that a
frame costs one division and one increment, whatever the run's length, and agents'
histograms add up (`Lateness.merge`, `Lateness.from_summary`). Percentiles are the
upper edge of their bucket (within 5 % of a frame time below 4 frame times).
"""

from __future__ import annotations

import math
from typing import Any

from emulation.fidelity import MAX_KERNEL_DROPS, P99_LATENESS_PACKET_TIMES

LINEAR_PER_FRAME = 20       # buckets per frame time below LINEAR_FRAMES
LINEAR_FRAMES = 4
PER_OCTAVE = 4              # above: buckets per doubling
OCTAVES = 14                # up to 4 x 2^14 frame times (a minute at 1 ms frames)
BUCKETS = LINEAR_PER_FRAME * LINEAR_FRAMES + PER_OCTAVE * OCTAVES + 1
# Faithful by the fabric's bounds (emulation/fidelity.py, their one owner): 99 % of the
# frames no later than one frame time -- then a queue the agent adds holds less than a
# frame most of the time, below any ECN threshold -- and no frame lost in the kernel.
ON_TIME_FRAMES = 1.0        # a frame no later than this is on time
# Earlier than its schedule by more than this (frame times) is ``early``: less is the
# timer jitter of the departure before it (a frame's schedule starts from when that one
# actually left, its pacer's from when it should have).
EARLY_FRAMES = 1 / LINEAR_PER_FRAME


def _upper_edge(i: int) -> float:
    """The upper edge of bucket ``i``, in frame times."""
    linear = LINEAR_PER_FRAME * LINEAR_FRAMES
    if i < linear:
        return (i + 1) / LINEAR_PER_FRAME
    return LINEAR_FRAMES * 2 ** ((i - linear + 1) / PER_OCTAVE)


class Lateness:
    """Lateness of events against their schedule, in a fixed histogram of frame times
    of ``unit_s`` seconds each."""

    def __init__(self, unit_s: float) -> None:
        if not unit_s > 0:
            raise ValueError(f"a frame time must be > 0 s, got {unit_s}")
        self.unit_s = unit_s
        self._per_unit = 1.0 / unit_s
        self._early_s = -EARLY_FRAMES * unit_s
        self.buckets = [0] * BUCKETS
        self.count = 0
        self.early = 0
        self.max_s = 0.0

    def add(self, late_s: float) -> None:
        """One event ``late_s`` seconds after its schedule (negative: before it)."""
        self.count += 1
        if late_s < 0:
            if late_s < self._early_s:
                self.early += 1
            self.buckets[0] += 1
            return
        if late_s > self.max_s:
            self.max_s = late_s
        x = late_s * self._per_unit
        if x < LINEAR_FRAMES:
            self.buckets[int(x * LINEAR_PER_FRAME)] += 1
        else:
            i = LINEAR_PER_FRAME * LINEAR_FRAMES + int(math.log2(x / LINEAR_FRAMES) * PER_OCTAVE)
            self.buckets[min(i, BUCKETS - 1)] += 1

    def percentile(self, q: float) -> float:
        """Lateness (frame times) that ``q`` of the events did not exceed (0 if none)."""
        if not self.count:
            return 0.0
        need, seen = q * self.count, 0
        for i, n in enumerate(self.buckets):
            seen += n
            if seen >= need:
                return min(_upper_edge(i), self.max_s * self._per_unit)
        return self.max_s * self._per_unit

    def merge(self, other: "Lateness") -> "Lateness":
        """Add ``other``'s events (same frame time) to this histogram; returns self."""
        if not math.isclose(other.unit_s, self.unit_s):
            raise ValueError(f"cannot merge lateness in frame times of {other.unit_s} s "
                             f"into one of {self.unit_s} s")
        self.buckets = [a + b for a, b in zip(self.buckets, other.buckets)]
        self.count += other.count
        self.early += other.early
        self.max_s = max(self.max_s, other.max_s)
        return self

    def summary(self) -> dict[str, Any]:
        """What a results file carries: the figures, and the non-empty buckets (so
        that histograms of several agents can be merged again)."""
        on_time = sum(self.buckets[:int(ON_TIME_FRAMES * LINEAR_PER_FRAME)])
        p50, p99, unit_us = self.percentile(0.5), self.percentile(0.99), self.unit_s * 1e6
        return {"count": self.count, "early": self.early,
                "on_time_frac": on_time / self.count if self.count else 1.0,
                "p50_frames": p50, "p99_frames": p99, "max_frames": self.max_s * self._per_unit,
                "p50_us": p50 * unit_us, "p99_us": p99 * unit_us, "max_us": self.max_s * 1e6,
                "frame_time_us": unit_us,
                "buckets": {str(i): n for i, n in enumerate(self.buckets) if n}}

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> "Lateness":
        """The histogram a `summary` was made from."""
        lat = cls(summary["frame_time_us"] / 1e6)
        for i, n in summary["buckets"].items():
            lat.buckets[int(i)] = n
        lat.count, lat.early, lat.max_s = summary["count"], summary["early"], summary["max_us"] / 1e6
        return lat

    def faithful(self) -> bool:
        return self.percentile(0.99) <= P99_LATENESS_PACKET_TIMES


def report(nics: dict[str, tuple[Lateness, Lateness, int]], unit_s: float) -> dict[str, Any]:
    """An agent's fidelity: per NIC (``{name: (tx, rx, kernel drops)}``) and for all
    of them, and whether the agent kept the bound (``faithful``)."""
    tx, rx = Lateness(unit_s), Lateness(unit_s)
    per_nic = {}
    for name, (t, r, drops) in nics.items():
        tx.merge(t)
        rx.merge(r)
        per_nic[name] = {"tx": t.summary(), "rx": r.summary(), "kernel_drops": drops}
    drops = sum(d for _, _, d in nics.values())
    return {"tx": tx.summary(), "rx": rx.summary(), "kernel_drops": drops,
            "faithful": tx.faithful() and rx.faithful() and drops <= MAX_KERNEL_DROPS, "nics": per_nic}
