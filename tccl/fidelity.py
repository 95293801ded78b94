"""How faithfully an agent kept the emulated time: lateness histograms per NIC.

Two things can make an agent's numbers come from the CPU instead of the modelled
network, and each NIC measures both, in emulated time:

* departures (``tx``): how late each data frame left against its schedule -- the later
  of the NIC's line-rate pacer (previous departure + that frame's serialisation time)
  and the time the frame became sendable (its QP's DCQCN pacer, or the post, ACK or
  timeout that gave the QP work). A frame that leaves before its schedule counts as
  on time, and as ``early`` if by more than `EARLY_FRAMES`: a NIC catching up after a
  late wake-up sends a few frames back to back;
* handling (``rx``): how long after its arrival (the kernel's timestamp) each received
  frame was handled -- the delay added to its ACK, its CNP, the next send it enables.

Lateness is kept in frame times (the time an MTU frame takes at line rate: the NIC's
packet time) in the fabric's one histogram, `emulation.fidelity.LatenessHistogram`,
and judged by the fabric's bounds (`emulation.fidelity`, their one owner): so the
switches' and the agents' lateness merge into one report of a run.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from emulation.fidelity import (MAX_KERNEL_DROPS, ON_TIME_PACKET_TIMES, P99_LATENESS_PACKET_TIMES,
                                LatenessHistogram)

# Earlier than its schedule by more than this (frame times) is ``early``: less is the
# timer jitter of the departure before it (a frame's schedule starts from when that one
# actually left, its pacer's from when it should have).
EARLY_FRAMES = 0.05


class Lateness:
    """Lateness of events against their schedule, in frame times of ``unit_s`` seconds
    (a `LatenessHistogram`), and how many were early."""

    def __init__(self, unit_s: float) -> None:
        if not unit_s > 0:
            raise ValueError(f"a frame time must be > 0 s, got {unit_s}")
        self.unit_s = unit_s
        self._per_unit = 1.0 / unit_s
        self._early_s = -EARLY_FRAMES * unit_s
        self.histogram = LatenessHistogram()
        self.early = 0

    @property
    def count(self) -> int:
        return self.histogram.total

    @property
    def max_s(self) -> float:
        return self.histogram.max * self.unit_s

    def add(self, late_s: float) -> None:
        """One event ``late_s`` seconds after its schedule (negative: before it)."""
        if late_s < self._early_s:
            self.early += 1
        self.histogram.add(late_s * self._per_unit)

    def percentile(self, q: float) -> float:
        """Lateness (frame times) that ``q`` of the events did not exceed (0 if none)."""
        return self.histogram.quantile(q)

    def merge(self, other: "Lateness") -> "Lateness":
        """Add ``other``'s events (same frame time) to this histogram; returns self."""
        if not math.isclose(other.unit_s, self.unit_s):
            raise ValueError(f"cannot merge lateness in frame times of {other.unit_s} s "
                             f"into one of {self.unit_s} s")
        self.histogram = self.histogram.merged(other.histogram)
        self.early += other.early
        return self

    def summary(self) -> dict[str, Any]:
        """What a results file carries: the figures, and the histogram (so that the
        histograms of several agents, and of the switches, can be merged again)."""
        p50, p99, unit_us = self.percentile(0.5), self.percentile(0.99), self.unit_s * 1e6
        return {"count": self.count, "early": self.early,
                "on_time_frac": self.histogram.fraction_within(ON_TIME_PACKET_TIMES),
                "p50_frames": p50, "p99_frames": p99, "max_frames": self.histogram.max,
                "p50_us": p50 * unit_us, "p99_us": p99 * unit_us, "max_us": self.max_s * 1e6,
                "frame_time_us": unit_us, "lateness": self.histogram.to_json()}

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> "Lateness":
        """The histogram a `summary` was made from."""
        lat = cls(summary["frame_time_us"] / 1e6)
        lat.histogram = LatenessHistogram.from_json(summary["lateness"])
        lat.early = summary["early"]
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


def agents_window(reports: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, LatenessHistogram], int]:
    """The agents' part of a run's fidelity from their reports (server -> the
    ``fidelity`` of its results file, `report`'s format): every NIC's departures and
    handling merged, and their kernel drops, for `emulation.fidelity.Fidelity.with_agents`."""
    tx, rx, drops = LatenessHistogram(), LatenessHistogram(), 0
    for fid in reports.values():
        tx = tx.merged(LatenessHistogram.from_json(fid["tx"]["lateness"]))
        rx = rx.merged(LatenessHistogram.from_json(fid["rx"]["lateness"]))
        drops += int(fid["kernel_drops"])
    return {"agent departures": tx, "agent handling": rx}, drops
