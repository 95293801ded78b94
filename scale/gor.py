"""What GOR's placement makes of a step's flows: the ports after its moves.

GOR itself (`controller.gor`) learns the flows from samples and acts on congestion
alarms; at flow level both are known exactly, so this runs its planning steps on
them directly: Hedera demands (`controller.demand`), the alarmed links -- fabric links
whose flows' demands exceed their capacity (a queue that grows: ECN marks, the alarm) --,
the global placement of every spine-crossing flow (`controller.placement`, candidates
from `scale.fabric.FabricIndex.candidate_paths`: `controller.paths`' for a whole job at
once), and the source port that puts each moved flow on its new
path (`controller.paths.find_port`, avoiding ports of the same address pair as GOR's
mover does). It is GOR's steady state: the demo's first iteration, before the moves
land, runs at the library's own pace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from controller.config import GorConfig
from controller.demand import FlowEnds, estimate_demands
from controller.paths import find_port
from controller.placement import EPSILON, FlowToPlace, place
from topo.hashmodel import FiveTuple

from scale.fabric import NONE, FabricIndex, FlowPaths


@dataclass(frozen=True)
class Replan:
    """GOR's ports for a step's flows (same order), and how many flows it moved."""

    sports: np.ndarray
    moves: int


def replan(index: FabricIndex, src: np.ndarray, dst: np.ndarray, sports: np.ndarray,
           config: GorConfig = GorConfig()) -> Replan:
    """GOR's placement of the flows NIC ``src`` -> NIC ``dst`` on ports ``sports``."""
    plan = index.plan
    paths = index.paths(src, dst, sports)
    ips = {int(n): index.ip(int(n)) for n in np.unique(np.concatenate([src, dst]))}
    host_bps = plan.spec.links.host_mbps * 1e6
    demands = estimate_demands([FlowEnds(k, ips[s], ips[d]) for k, (s, d) in enumerate(zip(src, dst))],
                               host_bps)
    demand = np.array([demands[k] for k in range(len(src))])
    alarmed = _overloaded(index, paths, demand)
    if not alarmed:
        return Replan(sports, 0)
    fabric = index.fabric_links
    capacity = dict(zip((index.link_name(l) for l in fabric), index.capacity_bps(fabric).tolist()))
    to_place = []
    crossing = np.nonzero(paths.switch_hops > 1)[0]       # through the fabric, not one leaf
    options = index.candidate_paths(src[crossing], dst[crossing])
    for k, candidates in zip(crossing.tolist(), options):
        current = tuple(index.name(int(n)) for n in paths.nodes[k] if n != NONE)
        to_place.append(FlowToPlace(k, demands[k], current, tuple(candidates)))
    result = place(to_place, capacity, {index.link_name(l) for l in alarmed}, config.safety)
    out = sports.copy()
    for k, path in sorted(result.moves.items()):
        pair = (src == src[k]) & (dst == dst[k])
        used = set(int(p) for p in out[pair])
        out[k] = find_port(plan, FiveTuple(ips[src[k]], ips[dst[k]], sport=int(sports[k])), list(path),
                           avoid=used)
    return Replan(out, len(result.moves))


def _overloaded(index: FabricIndex, paths: FlowPaths, demand: np.ndarray) -> set[int]:
    """Fabric links whose flows' demands exceed their capacity."""
    used = paths.links != NONE
    ids, link_of = np.unique(paths.links[used], return_inverse=True)
    load = np.bincount(link_of, weights=np.broadcast_to(demand[:, None], used.shape)[used],
                       minlength=len(ids))
    over = index.is_fabric(ids) & (load > index.capacity_bps(ids) * (1 + EPSILON))
    return {int(l) for l in ids[over]}
