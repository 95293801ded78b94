"""Max-min fair rates by progressive filling (Bertsekas & Gallager, Data Networks,
sec. 6.5.2): every flow's rate grows at the same pace until a link is full; the flows
crossing a full link are frozen at their rate; the others keep growing.

The flows of a RoCE collective are elastic (a QP sends as fast as its DCQCN rate lets
it) and DCQCN converges towards the fair share of a shared bottleneck, so max-min fair
rates are what the fabric gives a step's flows once their rates settle. One round per
distinct bottleneck level, each a few numpy passes over the (flow, link) incidences.

Flows may be **coupled** into units that share one rate: the connections of a ring
collective run in lock step (a rank forwards what it receives, so every hop of a
ring moves at the pace of its slowest), and a connection splits its data evenly over
its QPs. A unit grows while none of its links is full; a full link freezes every unit
with a flow on it. With one unit per flow this is plain max-min fairness.

It lives in controller/ because GOR simulates its candidate placements with it before
it moves a flow (`controller.simulate`); the flow-level model `scale/` runs it on whole
jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

# A flow's row of link ids is padded with this past its last link (paths differ in
# length: `scale.fabric.FlowPaths`).
NONE = -1

# A link with less than this fraction of its capacity left is full (float noise of the
# repeated subtractions, far below any rate a fabric tells apart).
FULL = 1e-9


@dataclass(frozen=True)
class Allocation:
    """Per flow its rate (bit/s); per link id (``links``, sorted) the flows crossing it
    and the bit/s they carry."""

    rates: np.ndarray
    links: np.ndarray
    flows_per_link: np.ndarray
    load_bps: np.ndarray


def max_min_rates(flow_links: np.ndarray, capacity_bps: Mapping[int, float] | Callable[[np.ndarray], np.ndarray],
                  units: np.ndarray | None = None) -> Allocation:
    """Max-min fair rates of flows whose paths are the rows of ``flow_links`` (link ids,
    NONE-padded; see `scale.fabric.FlowPaths`), ``capacity_bps`` giving each link's rate
    (a mapping by link id, or a function of an array of ids, as
    `scale.fabric.FabricIndex.capacity_bps`); ``units`` couples flows (module doc: flows
    with the same number share a rate; default: every flow its own). Raises ValueError
    for a flow that crosses no link or a link without a positive capacity."""
    n = len(flow_links)
    unit = np.arange(n) if units is None else np.unique(np.asarray(units), return_inverse=True)[1]
    used = flow_links != NONE
    if n and not used.any(axis=1).all():
        raise ValueError(f"flow {int(np.argmin(used.any(axis=1)))} crosses no link: no rate to share")
    flow_of = np.nonzero(used)[0]
    ids, link_of = np.unique(flow_links[used], return_inverse=True)
    if callable(capacity_bps):
        cap = np.asarray(capacity_bps(ids), dtype=float)
    else:
        missing = [int(i) for i in ids if int(i) not in capacity_bps]
        if missing:
            raise ValueError(f"no capacity for link(s) {missing[:5]}")
        cap = np.array([capacity_bps[int(i)] for i in ids], dtype=float)
    if np.any(cap <= 0):
        raise ValueError(f"link {int(ids[np.argmax(cap <= 0)])} has no positive capacity")
    rates = np.zeros(n)
    frozen = np.zeros(unit.max() + 1 if n else 0, dtype=bool)
    counts = np.bincount(link_of, minlength=len(ids))
    unit_of = unit[flow_of]
    # The incidences, flows and links still growing, shrunk as units freeze: a 100k-GPU
    # step has dozens of bottleneck levels, and each round then costs what is left of the
    # job, not all of it (the same arithmetic on each link: the same rates). The links
    # are compacted each time half the incidences left at the last compaction froze.
    grow_link, grow_unit = link_of, unit_of        # grow_link: positions in ``left``
    grow_flow = np.arange(n)
    left, full_at = cap.copy(), FULL * cap          # per link still growing: bit/s not taken, bar of full
    compacted = len(grow_link)
    while len(grow_flow):
        growing = np.bincount(grow_link, minlength=len(left))
        busy = growing > 0
        share = np.where(busy, left / np.maximum(growing, 1), np.inf)
        tightest = int(np.argmin(share))
        step = share[tightest]
        rates[grow_flow] += step
        left -= step * growing
        full = busy & (left <= full_at)
        full[tightest] = True                  # the bottleneck, whatever the rounding
        frozen[grow_unit[full[grow_link]]] = True
        keep = ~frozen[grow_unit]
        grow_link, grow_unit = grow_link[keep], grow_unit[keep]
        grow_flow = grow_flow[~frozen[unit[grow_flow]]]
        if 2 * len(grow_link) < compacted:
            alive = np.bincount(grow_link, minlength=len(left)) > 0
            grow_link = (np.cumsum(alive) - 1)[grow_link]
            left, full_at = left[alive], full_at[alive]
            compacted = len(grow_link)
    load = np.bincount(link_of, weights=rates[flow_of], minlength=len(ids))
    return Allocation(rates, ids, counts, load)
