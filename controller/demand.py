"""Natural demand of flows, after Hedera's estimator (Al-Fares et al., NSDI 2010, sec. 4.1).

A flow's measured rate is what the network gives it now: on a congested link it is
throttled (DCQCN backs off), so placing flows by their measured rates places them by
the congestion one wants to remove. Hedera places them by their *natural demand*
instead: the rate a flow would get if only its sender's and its receiver's NIC limited
it, max-min fair between the flows sharing each NIC. Its estimator repeats two passes
until nothing changes:

* at every sender, the capacity the converged flows leave is shared equally among its
  other flows (``_est_src``);
* at every receiver whose flows ask for more than its capacity, the capacity is shared
  max-min fair: flows asking less than the equal share keep their demand, the others
  get the equal share of what is left and are converged (``_est_dst``).

The fixpoint is the max-min fair allocation at the hosts with every flow elastic (a
RoCE QP sends as fast as it is let). Rates are in bit/s; a host's capacity is its NIC's
line rate (each direction separately, as the links are full duplex).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

# Demands that move by less than this fraction of the largest NIC rate between two
# rounds have settled: far below anything a fabric can tell apart, above float noise.
TOLERANCE = 1e-9
# Hedera's estimator converges in at most (number of flows) rounds; the bound only
# turns a bug into an error instead of a hang.
MAX_ROUNDS_PER_FLOW = 4


@dataclass(frozen=True)
class FlowEnds:
    """A flow as the estimator sees it: an id of the caller's, its sending and its
    receiving host (NIC addresses in GOR)."""

    key: Hashable
    src: str
    dst: str


def estimate_demands(flows: Sequence[FlowEnds], capacity: Mapping[str, float] | float
                     ) -> dict[Hashable, float]:
    """Natural demand (bit/s) of every flow, by its ``key`` (module docstring).

    ``capacity`` is every host's NIC rate in bit/s, one number for all or a mapping
    from host to rate. Raises ValueError for a flow to itself, a duplicate key, a host
    without a capacity or a capacity that is not positive."""
    keys = [f.key for f in flows]
    if len(set(keys)) != len(keys):
        raise ValueError("demand estimation: flow keys must be unique")
    for f in flows:
        if f.src == f.dst:
            raise ValueError(f"demand estimation: flow {f.key!r} goes from {f.src} to itself")
    cap = _capacities(flows, capacity)
    out_of: dict[str, list[FlowEnds]] = defaultdict(list)
    into: dict[str, list[FlowEnds]] = defaultdict(list)
    for f in flows:
        out_of[f.src].append(f)
        into[f.dst].append(f)
    demand = {f.key: 0.0 for f in flows}
    converged = {f.key: False for f in flows}
    settled = TOLERANCE * max(cap.values(), default=0.0)
    for _ in range(MAX_ROUNDS_PER_FLOW * len(flows) + 1):
        before = dict(demand)
        for host, out in out_of.items():
            _est_src(out, cap[host], demand, converged)
        for host, incoming in into.items():
            _est_dst(incoming, cap[host], demand, converged)
        if all(abs(demand[k] - before[k]) <= settled for k in demand):
            return demand
    raise RuntimeError(f"demand estimation did not converge over {len(flows)} flows")


def _capacities(flows: Sequence[FlowEnds], capacity: Mapping[str, float] | float) -> dict[str, float]:
    hosts = {f.src for f in flows} | {f.dst for f in flows}
    if isinstance(capacity, (int, float)):
        cap = {h: float(capacity) for h in hosts}
    else:
        missing = sorted(hosts - set(capacity))
        if missing:
            raise ValueError(f"demand estimation: no capacity for host(s) {', '.join(missing)}")
        cap = {h: float(capacity[h]) for h in hosts}
    bad = sorted(h for h, c in cap.items() if not c > 0)
    if bad:
        raise ValueError(f"demand estimation: capacity must be > 0 bit/s, not for {', '.join(bad)}")
    return cap


def _est_src(out: list[FlowEnds], cap: float, demand: dict, converged: dict) -> None:
    """A sender's capacity left by its converged flows, shared equally by the others."""
    fixed = sum(demand[f.key] for f in out if converged[f.key])
    free = [f for f in out if not converged[f.key]]
    if free:
        share = max(0.0, cap - fixed) / len(free)
        for f in free:
            demand[f.key] = share


def _est_dst(incoming: list[FlowEnds], cap: float, demand: dict, converged: dict) -> None:
    """A receiver asked for more than its capacity: max-min fair shares of it; the
    flows limited here are converged."""
    if sum(demand[f.key] for f in incoming) <= cap:
        return
    limited = {f.key for f in incoming}
    kept = 0.0
    share = cap / len(incoming)
    while True:
        changed = False
        for f in incoming:
            if f.key in limited and demand[f.key] < share:
                kept += demand[f.key]
                limited.discard(f.key)
                changed = True
        if not changed or not limited:
            break
        share = (cap - kept) / len(limited)
    for f in incoming:
        if f.key in limited:
            demand[f.key] = share
            converged[f.key] = True
