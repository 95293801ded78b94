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

from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

import numpy as np

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
    hosts = sorted(cap)
    number = {h: n for n, h in enumerate(hosts)}
    src = np.array([number[f.src] for f in flows], dtype=np.int64)
    dst = np.array([number[f.dst] for f in flows], dtype=np.int64)
    demand = demand_columns(src, dst, np.array([cap[h] for h in hosts]))
    return dict(zip(keys, demand.tolist()))


def demand_columns(src: np.ndarray, dst: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """`estimate_demands` over numpy columns: flow n goes from host ``src[n]`` to host
    ``dst[n]`` (numbers indexing ``capacity``, bit/s per host). Each round is a few
    passes over all flows at once -- the flow-level model asks it of 200 000 flows
    (`scale.gor`). Raises ValueError for a capacity that is not positive."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    cap = np.asarray(capacity, dtype=float)
    if np.any(cap <= 0):
        raise ValueError(f"demand estimation: capacity must be > 0 bit/s, not for host {int(np.argmax(cap <= 0))}")
    n, hosts = len(src), len(cap)
    demand = np.zeros(n)
    converged = np.zeros(n, dtype=bool)
    settled = TOLERANCE * float(cap.max(initial=0.0))
    for _ in range(MAX_ROUNDS_PER_FLOW * n + 1):
        before = demand.copy()
        _est_src(src, cap, demand, converged, hosts)
        _est_dst(dst, cap, demand, converged, hosts)
        if np.all(np.abs(demand - before) <= settled):
            return demand
    raise RuntimeError(f"demand estimation did not converge over {n} flows")


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


def _est_src(src: np.ndarray, cap: np.ndarray, demand: np.ndarray, converged: np.ndarray, hosts: int) -> None:
    """Every sender's capacity left by its converged flows, shared equally by the others."""
    fixed = np.bincount(src, weights=np.where(converged, demand, 0.0), minlength=hosts)
    free = np.bincount(src, weights=~converged, minlength=hosts)
    share = np.maximum(0.0, cap - fixed) / np.maximum(free, 1)
    demand[~converged] = share[src[~converged]]


def _est_dst(dst: np.ndarray, cap: np.ndarray, demand: np.ndarray, converged: np.ndarray, hosts: int) -> None:
    """Every receiver asked for more than its capacity: max-min fair shares of it; the
    flows limited there are converged. The share is the water level: with a receiver's
    m demands sorted, d_0 <= ... <= d_(m-1), the first j where d_j >= (cap - d_0 - ...
    - d_(j-1)) / (m - j) -- where Hedera's loop (drop the flows under the equal share,
    share again) stops -- and every flow asking at least that much gets it."""
    asked = np.bincount(dst, weights=demand, minlength=hosts)
    over = asked > cap
    if not over.any():
        return
    mine = np.flatnonzero(over[dst])                      # flows into the receivers over capacity
    host = dst[mine]
    order = np.lexsort((demand[mine], host))
    mine, host = mine[order], host[order]
    d = demand[mine]
    first = np.r_[True, host[1:] != host[:-1]]
    start = np.flatnonzero(first)
    group = np.cumsum(first) - 1
    j = np.arange(len(mine)) - start[group]               # position within the receiver
    m = np.bincount(group)[group]
    before = np.cumsum(d) - d
    kept = before - before[start][group]                  # demands below position j
    share = (cap[host] - kept) / (m - j)
    stops = d >= share
    # The first stop of each receiver. The largest demand is at least the share the
    # others leave when the receiver is over capacity; a receiver with no stop was over
    # it only by float noise of the sums and limits nothing.
    at = np.full(len(start), len(mine))
    np.minimum.at(at, group[stops], np.flatnonzero(stops))
    level = np.append(share, np.inf)[at]
    limited = d >= level[group]
    demand[mine[limited]] = level[group][limited]
    converged[mine[limited]] = True
