"""Source-port planning: which UDP source port each queue pair's flow uses.

The fabric's leaves spread flows over their spine uplinks by hashing the 5-tuple, and
the only field a RoCE sender can choose is the UDP source port. Two modes:

* ``random``: a port drawn from the dynamic range, what a stock library does; with k
  flows on k uplinks every uplink carries one flow only with probability k!/k^k.
* ``orthogonal`` (TCCL): plan the flows that run at the same time together. Flows are
  edges of a bipartite multigraph between source leaves and destination leaves, and a
  spine is a colour: a proper edge colouring gives every flow of a source leaf a
  distinct uplink and every flow into a destination leaf a distinct spine downlink.
  Bipartite graphs are colourable with max-degree colours (Koenig), found here by the
  alternating-path (Kempe chain) method; beyond that, colours are reused least-loaded
  first. Then, per flow, the hash model (`topo.hashmodel`, bit-exact with the data
  plane) finds a source port that the leaf maps onto the chosen spine.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Hashable, Iterable, Sequence

from topo.addressing import AddressPlan
from topo.hashmodel import FiveTuple, ecmp_index

PORT_RANGE = (49152, 65535)     # IANA dynamic ports


def random_ports(flows: Iterable[tuple[int, int]], seed: int | str) -> dict[tuple[int, int], int]:
    """A uniformly random dynamic port per flow (seeded: every agent draws the same)."""
    rng = random.Random(f"ports/{seed}")
    return {f: rng.randint(*PORT_RANGE) for f in flows}


def color_bipartite(edges: Sequence[tuple[Hashable, Hashable]], k: int) -> list[int]:
    """A colour in 0..k-1 per edge (u, v) of a bipartite multigraph (u and v from
    disjoint sides) so that edges sharing a vertex differ wherever degrees allow."""
    if k < 1:
        raise ValueError(f"need at least one colour, got {k}")
    color: list[int] = [-1] * len(edges)
    at: dict[Hashable, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))

    def free(node: Hashable) -> list[int]:
        return [c for c in range(k) if not at[node][c]]

    for e, (u, v) in enumerate(edges):
        fu, fv = free(u), free(v)
        if not fu or not fv:
            # Over-subscribed vertex: the colour least used at both ends.
            c = min(range(k), key=lambda c: (len(at[u][c]) + len(at[v][c]), c))
        else:
            common = [c for c in fu if c in fv]
            if common:
                c = common[0]
            else:
                a, b = fu[0], fv[0]
                _flip_path(edges, color, at, v, a, b)
                c = a
        color[e] = c
        at[u][c].append(e)
        at[v][c].append(e)
    return color


def _flip_path(edges: Sequence[tuple[Hashable, Hashable]], color: list[int],
               at: dict[Hashable, dict[int, list[int]]], start: Hashable, a: int, b: int) -> None:
    """Swap colours a and b along the a/b-alternating path that leaves ``start`` on a."""
    path, node, want, seen = [], start, a, set()
    while at[node][want]:
        e = at[node][want][0]
        if e in seen:
            break
        seen.add(e)
        path.append(e)
        u, v = edges[e]
        node = v if node == u else u
        want = b if want == a else a
    for e in path:
        old = color[e]
        new = b if old == a else a
        for end in edges[e]:
            at[end][old].remove(e)
            at[end][new].append(e)
        color[e] = new


def orthogonal_ports(plan: AddressPlan, flows: Sequence[tuple[str, str]], seed: int | str
                     ) -> dict[tuple[str, str], int]:
    """Source ports for concurrent flows (src IP, dst IP) spreading them over spines.

    Flows between NICs of the same leaf never reach a spine and get a random port.
    """
    rng = random.Random(f"orthogonal/{seed}")
    k = plan.spec.spines
    up = [f for f in flows if plan.nic(f[0]).leaf != plan.nic(f[1]).leaf]
    colors = color_bipartite([(("src", plan.nic(s).leaf), ("dst", plan.nic(d).leaf)) for s, d in up], k)
    crossing = set(up)
    out = {f: rng.randint(*PORT_RANGE) for f in flows if f not in crossing}
    used: set[int] = set()
    for (src, dst), spine in zip(up, colors):
        out[(src, dst)] = port_for_spine(plan, src, dst, spine, rng.randint(*PORT_RANGE), used)
        used.add(out[(src, dst)])
    return out


def port_for_spine(plan: AddressPlan, src: str, dst: str, spine: int, start: int,
                   avoid: set[int] | None = None) -> int:
    """The first dynamic port from ``start`` (wrapping around) that the source leaf's
    ECMP hash sends onto ``spine``; ports in ``avoid`` are skipped."""
    if not 0 <= spine < plan.spec.spines:
        raise ValueError(f"spine {spine} out of range 0..{plan.spec.spines - 1}")
    salt = plan.switch(plan.nic(src).leaf).salt
    lo, hi = PORT_RANGE
    span = hi - lo + 1
    for i in range(span):
        sport = lo + (start - lo + i) % span
        if avoid and sport in avoid:
            continue
        if ecmp_index(plan.spec.ecmp_hash, salt, FiveTuple(src, dst, sport=sport), plan.spec.spines) == spine:
            return sport
    raise ValueError(f"no source port in {lo}..{hi} maps {src}->{dst} onto spine {spine}")


def uplink_of(plan: AddressPlan, src: str, dst: str, sport: int) -> int | None:
    """The spine index a flow takes from its source leaf (None: same leaf, no uplink)."""
    if plan.nic(src).leaf == plan.nic(dst).leaf:
        return None
    salt = plan.switch(plan.nic(src).leaf).salt
    return ecmp_index(plan.spec.ecmp_hash, salt, FiveTuple(src, dst, sport=sport), plan.spec.spines)
