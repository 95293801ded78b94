"""Paths of flows through the fabric as it is routed now (failed cables included):
prediction, the candidate ECMP paths of a flow, and the source-port search that puts a
flow onto a chosen path.

`topo.hashmodel` is the one model of the data plane's hash, of a flow's path and of
the source-port range and search; this module adds what the controller knows and the
agents do not: which ECMP group (`controller.routes.ecmp_members`) a leaf uses for a
destination while cables are down. With no failures `predict` equals
`topo.hashmodel.predict_path`.

A path is the list of nodes a packet visits (server, leaf, [spine, [super-spine,
spine,] leaf,] server); its directed links are consecutive pairs. Across pods a path
is chosen at two hops -- the leaf's spine (plane) and that spine's super-spine -- and
the port search lands a flow on both at once.
"""

from __future__ import annotations

import zlib
from typing import Iterable

import networkx as nx

from controller.routes import NO_FAILURES, Down, ecmp_members, super_members
from topo.addressing import AddressPlan
from topo.hashmodel import (PORT_RANGE, FiveTuple, path_via, ports_from, predict_path, source_port_for_spine,
                            spine_uplink, uplink)

LinkId = tuple[str, str]


def links_of(path: list[str]) -> list[LinkId]:
    """Directed links (from, to) of a path."""
    return list(zip(path, path[1:]))


def predict(plan: AddressPlan, flow: FiveTuple, down: Down = NO_FAILURES) -> list[str] | None:
    """The path of ``flow`` with cables ``down`` failed; None when its leaf drops it
    (no spine reaches the destination). Across pods the spine hashes over its group for
    the destination pod, which a failed spine--super-spine cable shrinks as well
    (`controller.routes.super_members`), so both hops are chosen among live members."""
    src, dst = plan.nic(flow.src).leaf, plan.nic(flow.dst).leaf
    if src == dst:
        return predict_path(plan, flow)
    members = ecmp_members(plan, src, dst, down)
    if not members:
        return None
    spine = uplink(plan, flow, members)
    supers = _super_group(plan, flow, spine, down)
    return path_via(plan, flow, spine, None if supers is None else spine_uplink(plan, flow, spine, supers))


def _super_group(plan: AddressPlan, flow: FiveTuple, spine: int, down: Down) -> tuple[int, ...] | None:
    """The super-spines (group order) spine number ``spine`` of ``flow``'s source pod
    hashes it over, cables ``down`` failed; None when the flow stays in its pod."""
    src_pod, dst_pod = plan.pod_of(plan.nic(flow.src).block), plan.pod_of(plan.nic(flow.dst).block)
    if src_pod == dst_pod:
        return None
    return super_members(plan, plan.spine(src_pod, spine).name, dst_pod, down)


def candidate_paths(plan: AddressPlan, flow: FiveTuple, down: Down = NO_FAILURES) -> list[list[str]]:
    """Every path ECMP can give ``flow`` now: the shortest paths on the topology graph
    between its NICs' servers that enter at its source leaf and leave at its
    destination leaf over cables that are up, going up a spine of the leaf's ECMP group
    (one per usable spine in a two-tier fabric; per usable spine and super-spine of its
    plane across pods)."""
    src, dst = plan.nic(flow.src), plan.nic(flow.dst)
    if src.leaf == dst.leaf:
        return [[src.server, src.leaf, dst.server]]
    if not down and plan.pod_of(src.block) == plan.pod_of(dst.block):
        # Nothing failed, one pod: one path per spine, without building the topology
        # graph (the flow-level model asks this for every flow of a large job).
        return sorted(path_via(plan, flow, k) for k in range(plan.spec.spines))
    g = plan.graph()
    g.remove_edges_from(tuple(c) for c in down if len(c) == 2)
    try:
        middles = list(nx.all_shortest_paths(g, src.leaf, dst.leaf))
    except nx.NetworkXNoPath:
        return []
    pod = plan.switch(src.leaf).pod
    usable = {plan.spine(pod, k).name for k in ecmp_members(plan, src.leaf, dst.leaf, down)}
    return [[src.server, *m, dst.server] for m in sorted(middles) if m[1] in usable]


# A `PathCache` forgets everything past this many entries (a few per flow GOR has
# seen: a job's QPs, re-asked every loop), so a long-lived GOR's cache stays small.
PATH_CACHE_MAX = 1 << 16


class PathCache:
    """`predict` and `candidate_paths` of ``plan``, remembered per (flow, cables down):
    a reroute loop asks both for every active flow twice (the elephants' placement and
    everyone's), each time parsing both addresses and hashing every hop -- measured on
    the demo's 32 QPs, 0.06 of its 0.085 s. Exact: the answers depend only on the plan,
    the 5-tuple and the cables down, which are the key (the plan is the cache's own)."""

    def __init__(self, plan: AddressPlan) -> None:
        self.plan = plan
        self._predicted: dict[tuple[FiveTuple, Down], list[str] | None] = {}
        self._candidates: dict[tuple[FiveTuple, Down], list[list[str]]] = {}

    def predict(self, flow: FiveTuple, down: Down = NO_FAILURES) -> list[str] | None:
        """`predict` (a copy: callers may change the list)."""
        key = (flow, down)
        if key not in self._predicted:
            self._trim(self._predicted)
            self._predicted[key] = predict(self.plan, flow, down)
        path = self._predicted[key]
        return None if path is None else list(path)

    def candidates(self, flow: FiveTuple, down: Down = NO_FAILURES) -> list[list[str]]:
        """`candidate_paths` (copies)."""
        key = (flow, down)
        if key not in self._candidates:
            self._trim(self._candidates)
            self._candidates[key] = candidate_paths(self.plan, flow, down)
        return [list(p) for p in self._candidates[key]]

    @staticmethod
    def _trim(cache: dict) -> None:
        if len(cache) >= PATH_CACHE_MAX:
            cache.clear()


def search_start(flow: FiveTuple) -> int:
    """Where `find_port` starts its search for ``flow`` by default: a per-flow point of
    the range, so that flows between the same pair do not all get the same port."""
    lo, hi = PORT_RANGE
    return lo + zlib.crc32(f"{flow.src}>{flow.dst}>{flow.sport}".encode()) % (hi - lo + 1)


def find_port(plan: AddressPlan, flow: FiveTuple, path: list[str], down: Down = NO_FAILURES,
              avoid: Iterable[int] = (), start: int | None = None) -> int:
    """A UDP source port that puts ``flow`` (its other fields kept) on ``path`` at every
    hop, searched from ``start`` (default: a per-flow point, so that flows between the
    same pair do not all get the same port) through the dynamic range, wrapping around;
    ports in ``avoid`` (e.g. in use by other flows of the same pair) are skipped.
    Raises ValueError naming the flow and path if no port does."""
    lo, hi = PORT_RANGE
    if start is None:
        start = search_start(flow)
    skip = set(avoid)
    src, dst = plan.nic(flow.src).leaf, plan.nic(flow.dst).leaf
    if src == dst:
        # The leaf delivers the flow itself whatever its port: the path is that or none.
        if path == path_via(plan, flow, None):
            for sport in ports_from(start):
                if sport not in skip:
                    return sport
    else:
        # The path names its spine (and super-spine): one choice to check, not a search
        # over the group (the flow-level model asks this for thousands of moves).
        members = ecmp_members(plan, src, dst, down)
        choice = _choice(plan, path)
        if choice is not None and choice[0] in members and path == path_via(plan, flow, *choice):
            supers = None if choice[1] is None else _super_group(plan, flow, choice[0], down)
            if supers is None or choice[1] in supers:
                return source_port_for_spine(plan, flow, choice[0], start, skip, members, choice[1], supers)
    raise ValueError(f"no UDP source port in {lo}..{hi} puts {flow.src}->{flow.dst} "
                     f"onto {'-'.join(path)}")


def _choice(plan: AddressPlan, path: list[str]) -> tuple[int, int | None] | None:
    """The spine number a path of 5 nodes goes up (and, of 7, the super-spine number
    that spine goes up to); None for any other list of nodes."""
    if len(path) not in (5, 7):
        return None
    try:
        up = plan.switch(path[2])
        top = plan.switch(path[3]) if len(path) == 7 else None
    except KeyError:
        return None
    if up.role != "spine" or up.spine is None or (top is not None and top.role != "superspine"):
        return None
    return up.spine, None if top is None else top.superspine
