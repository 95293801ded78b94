"""The numbers of an experiment, computed from what the run recorded (pure functions).

* busbw: nccl-tests' formulas (`tccl.results.bus_factor`). A trace iteration runs
  several collectives one after another, so its busbw fraction is the time its
  collectives would take if each ran at its channel's line rate (the bottleneck link
  for network collectives, NVLink for ``tp`` groups on NVLink) over the time they
  took: ``ideal_comm_s / (iteration_s - compute_s)``. For a single collective this is
  exactly nccl-tests' ``busbw / link rate``.
* utilisation: bytes a switch port sent between two counter snapshots, over the
  link's capacity in that interval.
* spread: repeats are summarised as median, min and max.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from tccl.results import bus_factor
from tccl.trace import Trace, step_groups


class MetricsError(ValueError):
    """Recorded data that cannot give the number asked for; says which and why."""


@dataclass(frozen=True)
class StepCost:
    """One collective step of a trace at line rate: bytes per rank over the channel."""

    op: str
    group: str
    size: int
    ranks: int          # ranks per group (the n of the busbw formula)
    rate_bps: float     # the channel's line rate
    ideal_s: float


def step_costs(trace: Trace, ranks: Sequence, bottleneck_bps: float, nvlink_bps: float = 0.0
               ) -> list[StepCost]:
    """The ideal (line-rate) time of each collective step of ``trace`` for a job with
    ``ranks`` (tccl.job.RankInfo): busbw factor x size x 8 / channel rate."""
    if bottleneck_bps <= 0:
        raise MetricsError(f"the bottleneck link rate must be > 0, got {bottleneck_bps}")
    out = []
    for step in trace.steps:
        if step.op is None:
            continue
        n = 2 if step.group == "pp" else len(step_groups(step, tuple(ranks))[0])
        rate = nvlink_bps if step.group == "tp" and nvlink_bps > 0 else bottleneck_bps
        # A skewed all-to-all is bound by its hottest destination's ingress link.
        factor = (n - 1) * max(step.weights) / sum(step.weights) if step.weights else bus_factor(step.op, n)
        ideal = factor * step.size * 8 / rate if n > 1 else 0.0
        out.append(StepCost(step.op, step.group, step.size, n, rate, ideal))
    return out


def compute_seconds(trace: Trace) -> float:
    """Seconds of compute per iteration (the trace's ``compute_ms`` phases)."""
    return sum(s.compute_ms for s in trace.steps if s.op is None) / 1000


def job_iterations(per_server: Mapping[str, Sequence[float]]) -> list[float]:
    """Per iteration, the slowest server's time: a training step ends when its last
    rank finishes."""
    if not per_server:
        raise MetricsError("no agent reported iteration times")
    counts = {len(v) for v in per_server.values()}
    if len(counts) != 1 or 0 in counts:
        raise MetricsError(f"agents report different iteration counts: "
                           f"{ {s: len(v) for s, v in per_server.items()} }")
    return [max(times) for times in zip(*per_server.values())]


def busbw_frac(ideal_comm_s: float, iteration_s: float, compute_s: float) -> float:
    """The fraction of line rate the iteration's collectives reached (module doc)."""
    comm = iteration_s - compute_s
    if comm <= 0:
        raise MetricsError(f"iteration of {iteration_s:.4f} s is not longer than its "
                           f"{compute_s:.4f} s of compute: no communication time to divide by")
    return ideal_comm_s / comm


def utilisation(bytes_sent: int, seconds: float, capacity_bps: float) -> float:
    """Fraction of a link's capacity used by ``bytes_sent`` over ``seconds``."""
    if seconds <= 0 or capacity_bps <= 0:
        raise MetricsError(f"utilisation needs a positive interval and capacity, got "
                           f"{seconds} s at {capacity_bps} bit/s")
    return bytes_sent * 8 / seconds / capacity_bps


@dataclass(frozen=True)
class Spread:
    """Median and range of a number over repeats."""

    median: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.low, "max": self.high, "n": self.n}


def spread(values: Iterable[float]) -> Spread:
    vals = [float(v) for v in values]
    if not vals:
        raise MetricsError("no values to summarise")
    return Spread(statistics.median(vals), min(vals), max(vals), len(vals))


def median_of(values: Iterable[Any]) -> Any:
    """The median of the values that are not None (None if there are none) -- a repeat
    may lack a number, e.g. a run without GOR has no loop time; an integral median of
    counts stays an int, so summary.json shows 3, not 3.0."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    m = statistics.median(vals)
    return int(m) if all(isinstance(v, int) for v in vals) and float(m).is_integer() else m
