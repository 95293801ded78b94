"""Fidelity: did a run's numbers come from the modelled network, or from the CPU?

An emulated link is faithful when every frame leaves at the time the link model says
it leaves: when the previous frame's serialisation at the port rate is over and the
frame is at the head of its queue. A Python process that was off the CPU makes frames
leave late, and the traffic manager then releases what was due together -- a burst
that a real link never sends, and that looks like congestion to ECN and DCQCN. So,
after Mininet-HiFi's invariant checks, every departure's *lateness* (actual departure
minus scheduled departure, in emulated time) is recorded, on switch ports and on the
agents' NICs, together with frames the kernel dropped because a process did not read
its socket in time. A run is *faithful* when it meets the bounds below.

The switch and the agents keep lateness in a `LatenessHistogram` (fixed buckets, a few
integer adds per frame); readers take differences of two snapshots to get one job's
window, merge the histograms of all ports, and judge the result with `judge`.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from emulation.host import steal_share

# Lateness is kept in *packet times* (an MTU frame's serialisation at the port's rate),
# so ports of different rates, and the agents' NICs, share one histogram and one bound.
# Bucket upper bounds: 0 (on time), then steps of 2^(1/3) (x1.26: a quantile within 26 %
# of the truth) from 1/256 of a packet time (timer slack) to 1024 packet times (a process
# kept off the CPU for seconds); later departures go to an overflow bucket. The steps
# are powers of two's cube root so that the bounds below (1, 1/4 packet time) are
# bucket edges: a verdict against a bound is then exact, where a bucket straddling the
# bound (0.85..1.06 with x1.25 steps from 1/200) judged a p99 of 0.9 late.
BOUNDS: tuple[float, ...] = (0.0,) + tuple(2.0 ** (k / 3) for k in range(-24, 31))

# The bounds of a faithful run: p99 lateness under one packet time, no kernel drops.
# One packet time is an MTU frame's serialisation at the port's rate: a frame
# later than that has let the link sit idle for a whole frame, which the link model
# never does while there is a backlog.
P99_LATENESS_PACKET_TIMES = 1.0
# A frame dropped in the kernel is a loss that no modelled queue caused.
MAX_KERNEL_DROPS = 0
# Departures "on time": no later than a quarter of a packet time (the resolution at
# which the emulation's queueing is exact to within one frame in four).
ON_TIME_PACKET_TIMES = 0.25
# One bucket step: a quantile read off the histogram is within this factor of the truth.
BUCKET_STEP = 2.0 ** (1 / 3)


def dilation_covering(dilation: float, p99: float) -> float:
    """The dilation at which a p99 lateness of ``p99`` packet times at ``dilation``, held
    as long in wall time, fits one packet time: ``dilation x p99 x BUCKET_STEP`` (the
    p99 is a bucket's upper bound, the truth within a step below it), rounded up to a
    quarter; ``dilation`` itself when the lateness already fits.

    Why wall time: late frames on a virtual machine are mostly its hypervisor holding a
    vCPU off its core for milliseconds (`emulation.host`), which no dilation shortens --
    but a longer packet time covers it. Emulated on this machine (`bench.host_stall`:
    each core held for 2-8 ms, 30 % of the time; docs/fabric.md): the three-tier ring was
    late 2.52 packet times at dilation 1, 1.26-1.41 at 2, and faithful at 3."""
    if p99 <= P99_LATENESS_PACKET_TIMES:
        return dilation
    return max(dilation, math.ceil(dilation * p99 * BUCKET_STEP * 4) / 4)


class LatenessHistogram:
    """Counts of departures by lateness in packet times (`BOUNDS`, plus overflow)."""

    __slots__ = ("counts", "max")

    def __init__(self, counts: Iterable[int] | None = None, max: float = 0.0) -> None:
        self.counts = list(counts) if counts is not None else [0] * (len(BOUNDS) + 1)
        if len(self.counts) != len(BOUNDS) + 1:
            raise ValueError(f"a lateness histogram has {len(BOUNDS) + 1} buckets, "
                             f"got {len(self.counts)}")
        self.max = max

    def add(self, lateness: float) -> None:
        """Count one departure ``lateness`` packet times late (early counts as on time)."""
        if lateness > self.max:
            self.max = lateness
        self.counts[bisect.bisect_left(BOUNDS, lateness)] += 1

    @property
    def total(self) -> int:
        return sum(self.counts)

    def quantile(self, q: float) -> float:
        """Upper bound of the bucket holding the ``q`` quantile (packet times); 0 if empty."""
        total = self.total
        if not total:
            return 0.0
        need, seen = q * total, 0
        for i, n in enumerate(self.counts):
            seen += n
            if n and seen >= need:
                return min(BOUNDS[i], self.max) if i < len(BOUNDS) else self.max
        return self.max

    def fraction_within(self, bound: float) -> float:
        """Share of departures whose bucket lies wholly within ``bound``; 1 when empty."""
        total = self.total
        if not total:
            return 1.0
        return sum(n for b, n in zip(BOUNDS, self.counts) if b <= bound) / total

    def merged(self, other: "LatenessHistogram") -> "LatenessHistogram":
        return LatenessHistogram([a + b for a, b in zip(self.counts, other.counts)],
                                 max(self.max, other.max))

    def since(self, earlier: "LatenessHistogram") -> "LatenessHistogram":
        """The departures counted after snapshot ``earlier`` (the max stays an upper bound)."""
        return LatenessHistogram([max(0, a - b) for a, b in zip(self.counts, earlier.counts)],
                                 self.max)

    def to_json(self) -> dict[str, Any]:
        return {"counts": list(self.counts), "max": round(self.max, 4)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "LatenessHistogram":
        if not data:
            return cls()
        # Counts that crossed protobuf's Struct arrive as doubles.
        return cls([int(c) for c in data["counts"]], float(data.get("max", 0.0)))


@dataclass
class Fidelity:
    """One run's (or one window's) fidelity over every port and NIC it covers: the
    switches' departures (``lateness``) and, when the agents' reports are added
    (`with_agents`), their NICs' departures and handling of received frames, each held
    to the same bound."""

    lateness: LatenessHistogram = field(default_factory=LatenessHistogram)
    packet_time_us: float = 0.0    # shortest packet time among the ports (us), to show ms
    kernel_drops: int = 0
    saturated_s: float = 0.0       # emulated time some switch had its input saturated
    dilation: float = 1.0
    where: str = ""                # what was measured ("switches", "switches+agents")
    agents: dict[str, LatenessHistogram] = field(default_factory=dict)   # "agent departures", ...
    # Share of the machine's CPU time its hypervisor took during the window (the most
    # among the switches' machines; `emulation.host`): not judged -- the fabric cannot
    # help it -- but the likeliest cause of late frames on a virtual machine.
    steal: float | None = None

    def parts(self) -> dict[str, LatenessHistogram]:
        """Every histogram the run is judged on, by what it timed."""
        return {"switch departures": self.lateness, **self.agents}

    @property
    def p99(self) -> float:
        """p99 lateness in packet times: the worst of the parts."""
        return max(h.quantile(0.99) for h in self.parts().values())

    @property
    def on_time(self) -> float:
        merged = LatenessHistogram()
        for h in self.parts().values():
            merged = merged.merged(h)
        return merged.fraction_within(ON_TIME_PACKET_TIMES)

    def with_agents(self, agents: Mapping[str, LatenessHistogram], kernel_drops: int) -> "Fidelity":
        """This window with the agents' histograms and kernel drops added."""
        return dataclasses.replace(self, agents={**self.agents, **agents},
                                   kernel_drops=self.kernel_drops + kernel_drops,
                                   where="+".join(filter(None, (self.where, "agents"))))

    def dilation_needed(self) -> float:
        """The dilation at which this run's lateness would fit its bound
        (`dilation_covering`); the run's own dilation when its lateness fits already
        (a faithful run, or one unfaithful for kernel drops alone)."""
        return dilation_covering(self.dilation, self.p99)

    def problems(self) -> list[str]:
        """Why the run is unfaithful; empty when it meets every bound."""
        out = []
        for name, h in self.parts().items():
            p99 = h.quantile(0.99)
            if p99 > P99_LATENESS_PACKET_TIMES:
                out.append(f"{name}: p99 lateness {p99:.2f} packet times > {P99_LATENESS_PACKET_TIMES:g}")
        if self.kernel_drops > MAX_KERNEL_DROPS:
            out.append(f"{self.kernel_drops} frames dropped in the kernel")
        return out

    @property
    def faithful(self) -> bool:
        return not self.problems()

    def line(self) -> str:
        """``departures on time 99.3 %, p99 lateness 0.4 ms (0.12 packet times), ...``;
        for a run late beyond the bound, the dilation that would cover its lateness if
        that lateness came from stalls of the host (`dilation_needed`)."""
        ms = f"{self.p99 * self.packet_time_us / 1000:.2f} ms " if self.packet_time_us else ""
        verdict = "faithful" if self.faithful else "UNFAITHFUL: " + "; ".join(self.problems())
        if (needed := self.dilation_needed()) > self.dilation:
            verdict += f" (as late in wall time, it would fit at dilation {needed:g})"
        agents = "".join(f", {name} p99 {h.quantile(0.99):.2f}" for name, h in self.agents.items())
        total = sum(h.total for h in self.parts().values())
        steal = f", host steal {100 * self.steal:.0f} %" if self.steal is not None else ""
        return (f"departures on time {100 * self.on_time:.1f} % of {total}, "
                f"p99 lateness {ms}({self.p99:.2f} packet times{agents}), kernel drops {self.kernel_drops}, "
                f"input saturated {self.saturated_s:.2f} s, dilation {self.dilation:g}{steal} -- {verdict}")

    def to_json(self) -> dict[str, Any]:
        return {"faithful": self.faithful, "problems": self.problems(),
                "on_time_frac": round(self.on_time, 5), "p99_lateness_pkt": round(self.p99, 4),
                "p99_lateness_ms": round(self.p99 * self.packet_time_us / 1000, 3),
                "max_lateness_pkt": round(max(h.max for h in self.parts().values()), 3),
                "departures": self.lateness.total,
                "packet_time_us": round(self.packet_time_us, 1),
                "kernel_drops": self.kernel_drops, "saturated_s": round(self.saturated_s, 3),
                "dilation": self.dilation, "dilation_needed": self.dilation_needed(), "where": self.where,
                "host_steal_frac": None if self.steal is None else round(self.steal, 4),
                "lateness": self.lateness.to_json(),
                "agents": {name: {"p99_lateness_pkt": round(h.quantile(0.99), 4), "events": h.total,
                                  "lateness": h.to_json()} for name, h in self.agents.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Fidelity":
        return cls(LatenessHistogram.from_json(data.get("lateness")),
                   float(data.get("packet_time_us", 0.0)), int(data.get("kernel_drops", 0)),
                   float(data.get("saturated_s", 0.0)), float(data.get("dilation", 1.0)),
                   str(data.get("where", "")),
                   {name: LatenessHistogram.from_json(part.get("lateness"))
                    for name, part in data.get("agents", {}).items()},
                   None if data.get("host_steal_frac") is None else float(data["host_steal_frac"]))


def switches_window(before: Mapping[str, Mapping[str, Any]],
                    after: Mapping[str, Mapping[str, Any]]) -> Fidelity:
    """The fidelity of the switches between two rounds of `GetFidelity` snapshots
    (name -> the switch's cumulative counters, as `p4sim.switch.device.Device.fidelity`
    gives them). A switch missing from ``before`` counts from zero (but says nothing of
    its machine's steal, which it counts from the machine's boot)."""
    lateness, drops, saturated, packet_time, dilation = LatenessHistogram(), 0, 0.0, 0.0, 1.0
    steal: float | None = None
    for name, end in after.items():
        start = before.get(name, {})
        share = steal_share(start.get("host_cpu", {}), end.get("host_cpu", {}))
        if share is not None and (steal is None or share > steal):
            steal = share
        lateness = lateness.merged(LatenessHistogram.from_json(end.get("lateness"))
                                   .since(LatenessHistogram.from_json(start.get("lateness"))))
        drops += int(end.get("kernel_drops", 0)) - int(start.get("kernel_drops", 0))
        saturated += float(end.get("saturated_s", 0.0)) - float(start.get("saturated_s", 0.0))
        t = float(end.get("packet_time_us", 0.0))
        if t and (not packet_time or t < packet_time):
            packet_time = t
        dilation = float(end.get("dilation", dilation))
    return Fidelity(lateness, packet_time, drops, saturated, dilation, "switches", steal=steal)
