"""What GOR's placement makes of a step's flows: the ports after its moves.

GOR itself (`controller.gor`) learns the flows from samples and acts on congestion
alarms; at flow level both are known exactly, so this runs its planning steps on
them directly, over numpy columns so that one decision on a 100k-GPU job takes
seconds: Hedera demands (`controller.demand.demand_columns`); the alarmed links --
fabric links whose flows' demands exceed their capacity (a queue that grows: ECN
marks, the alarm); the placement, as a repair of the flows' choices of spine and of
super-spine (`controller.recolour`: a flow keeps its path where its links stay under
their bars, the ones beyond are re-placed; a link's bar is GOR's safety threshold, or
the even load where the demands leave no placement under it -- `controller.placement`'s
rule for flows of one demand); the simulation before acting -- the demand loads'
worst link and the max-min fair rates' step factor (`controller.simulate`'s measure)
of the placement in force and of the new one: nothing moves unless both are lower;
and the source port that puts each
moved flow on its new path (`FabricIndex.steer`, `controller.paths.find_port`'s search
for the whole job, skipping ports of the same address pair as GOR's mover does). It is
GOR's steady state: the demo's first iteration, before the moves land, runs at the
library's own pace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from controller.config import GorConfig
from controller.demand import demand_columns
from controller.fairness import max_min_rates
from controller.paths import search_start
from controller.placement import EPSILON
from controller.recolour import recolour
from controller.simulate import TIE
from topo.hashmodel import PORT_RANGE, FiveTuple

from scale.fabric import NONE, FabricIndex, FlowPaths


@dataclass(frozen=True)
class Replan:
    """GOR's ports for a step's flows (same order), how many flows it moved, the worst
    fabric link's projected utilisation (demand loads) and the simulated step factor
    (`controller.simulate`'s: the slowest flow's demand over its max-min fair rate)
    before and after."""

    sports: np.ndarray
    moves: int
    worst_before: float
    worst_after: float
    step_before: float
    step_after: float


def replan(index: FabricIndex, src: np.ndarray, dst: np.ndarray, sports: np.ndarray,
           config: GorConfig = GorConfig()) -> Replan:
    """GOR's placement of the flows NIC ``src`` -> NIC ``dst`` on ports ``sports``."""
    spec = index.plan.spec
    demand = demand_columns(src, dst, np.full(len(index.nic_ip), spec.links.host_mbps * 1e6))
    paths = index.paths(src, dst, sports)
    before = _worst(index, paths, demand)
    if before <= 1 + EPSILON:                     # no link over capacity: no alarm
        return Replan(sports, 0, before, before, 1.0, 1.0)
    spine, superspine = index.choices(src, dst, sports)
    crossing = np.flatnonzero((spine != NONE) & (demand > 0))
    largest = float(demand[crossing].max())

    def slots(link_mbps: float) -> int:
        """Flows of the largest demand a link takes under the safety threshold."""
        return math.floor(config.safety * link_mbps * 1e6 / largest + EPSILON)

    new_spine, new_super = spine.copy(), superspine.copy()
    new_spine[crossing] = recolour(index.nic_leaf[src[crossing]], index.nic_leaf[dst[crossing]],
                                   spine[crossing], spec.spines, slots(spec.links.uplink_mbps))
    across = crossing[superspine[crossing] != NONE]
    if len(across):
        k = new_spine[across]
        new_super[across] = recolour(index.nic_pod[src[across]] * spec.spines + k,
                                     index.nic_pod[dst[across]] * spec.spines + k,
                                     superspine[across], spec.super_spines, slots(spec.links.spine_uplink_mbps))
    planned = index.paths_via(src, dst, new_spine, new_super)
    after = _worst(index, planned, demand)
    moved = np.flatnonzero((new_spine != spine) | (new_super != superspine))
    # Simulate, then act: the step factor of the placement in force and of the new one.
    step_before = _step_factor(index, paths, demand)
    if not len(moved) or after >= before - EPSILON:
        return Replan(sports, 0, before, before, step_before, step_before)
    step_after = _step_factor(index, planned, demand)
    if step_after >= step_before - TIE:
        return Replan(sports, 0, before, before, step_before, step_before)
    ips = {n: index.ip(n) for n in np.unique(np.concatenate([src[moved], dst[moved]])).tolist()}
    start = np.array([search_start(FiveTuple(ips[s], ips[d], sport=p))
                      for s, d, p in zip(src[moved].tolist(), dst[moved].tolist(), sports[moved].tolist())],
                     dtype=np.int64)
    out = sports.copy()
    out[moved] = _ports(index, src[moved], dst[moved], new_spine[moved], new_super[moved], start)
    _apart(index, src, dst, out, moved, new_spine, new_super)
    return Replan(out, len(moved), before, after, step_before, step_after)


def _ports(index: FabricIndex, src: np.ndarray, dst: np.ndarray, spine: np.ndarray, superspine: np.ndarray,
           start: np.ndarray) -> np.ndarray:
    """`FabricIndex.steer`, raising ValueError naming a flow no port puts on its path."""
    ports = index.steer(src, dst, spine, superspine, start)
    if np.any(ports == NONE):
        k = int(np.argmax(ports == NONE))
        raise ValueError(f"no UDP source port puts {index.ip(int(src[k]))}->{index.ip(int(dst[k]))} "
                         f"onto spine {int(spine[k])}" + ("" if superspine[k] == NONE else
                                                          f", super-spine {int(superspine[k])}"))
    return ports


def _apart(index: FabricIndex, src: np.ndarray, dst: np.ndarray, out: np.ndarray, moved: np.ndarray,
           spine: np.ndarray, superspine: np.ndarray) -> None:
    """Give a moved flow whose port another flow of its address pair has the next port
    onto its path (``spine``, ``superspine``) that none of them has, as GOR's mover
    skips the pair's ports (rare: one port in 16 384 per pair)."""
    lo, hi = PORT_RANGE
    pair = src * len(index.nic_ip) + dst
    mine = np.zeros(len(src), dtype=bool)
    mine[moved] = True
    while True:
        order = np.lexsort((~mine, out, pair))          # per pair and port, an unmoved flow first
        same = (pair[order][1:] == pair[order][:-1]) & (out[order][1:] == out[order][:-1])
        clash = order[1:][same]
        clash = clash[mine[clash]]
        if not len(clash):
            return
        after = np.where(out[clash] == hi, lo, out[clash] + 1)
        out[clash] = _ports(index, src[clash], dst[clash], spine[clash], superspine[clash], after)


def _step_factor(index: FabricIndex, paths: FlowPaths, demand: np.ndarray) -> float:
    """How many times its demand's time the slowest flow takes at its max-min fair rate
    on ``paths`` (NIC links included: they hold a flow to its demand's share)."""
    alloc = max_min_rates(paths.links, index.capacity_bps)
    asked = demand > 0
    return float((demand[asked] / alloc.rates[asked]).max(initial=1.0))


def _worst(index: FabricIndex, paths: FlowPaths, demand: np.ndarray) -> float:
    """The highest utilisation of a fabric link with every flow at its demand."""
    used = paths.links != NONE
    ids, link_of = np.unique(paths.links[used], return_inverse=True)
    load = np.bincount(link_of, weights=np.broadcast_to(demand[:, None], used.shape)[used],
                       minlength=len(ids))
    fabric = index.is_fabric(ids)
    return float((load[fabric] / index.capacity_bps(ids[fabric])).max(initial=0.0))
