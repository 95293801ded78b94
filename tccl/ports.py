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
  first. In a three-tier fabric the flows that leave their pod are coloured once more,
  on the spine tier: a flow up spine k of pod p down to spine k of pod q is an edge
  between the two, and a super-spine of plane k is a colour, so every spine uplink and
  every super-spine downlink carries one flow where degrees allow. Then, per flow, the
  hash model (`topo.hashmodel`, bit-exact with the data plane) finds a source port
  that the leaf maps onto the chosen spine and that spine onto the chosen super-spine.

When GOR has published its topology document (failed cables change the leaves' ECMP
groups), the planner uses those groups: a flow only gets a spine its group holds, and
the hash picks member ``hash % len(group)``.
"""

from __future__ import annotations

import json
import random
import socket
from collections import defaultdict
from pathlib import Path
from typing import Hashable, Iterable, Mapping, Sequence

from topo.addressing import AddressPlan, nic_location
from topo.hashmodel import PORT_RANGE, FiveTuple, source_port_for_spine, uplink


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


Groups = Mapping[str, Mapping[str, Sequence[int]]]
"""ECMP groups as GOR publishes them: source leaf -> destination leaf -> the spine
numbers of the group, in member order (a flow takes member ``hash % len(group)``).
Missing entries mean "every spine" -- the fabric with no failed cable."""


def members(plan: AddressPlan, src: str, dst: str, groups: Groups | None = None) -> tuple[int, ...]:
    """The spines of the ECMP group that carries ``src`` -> ``dst`` out of its leaf."""
    if groups is None:
        return tuple(range(plan.spec.spines))
    a, b = plan.nic(src).leaf, plan.nic(dst).leaf
    if a in groups and b in groups[a]:
        return tuple(groups[a][b])
    return tuple(range(plan.spec.spines))


def orthogonal_ports(plan: AddressPlan, flows: Sequence[tuple[str, ...]], seed: int | str,
                     groups: Groups | None = None) -> dict[tuple[str, ...], int]:
    """Source ports for concurrent flows (src IP, dst IP[, anything that tells flows of
    one address pair apart, e.g. a QP index]) spreading them over spines.

    With ``groups`` (a fabric with failed cables, as GOR publishes it) every flow gets
    a spine of its own group, least-loaded at both ends first. Flows between NICs of
    the same leaf never reach a spine and get a random port.
    """
    rng = random.Random(f"orthogonal/{seed}")
    k = plan.spec.spines
    leaf = {ip: _leaf_of(plan, ip) for ip in {ip for f in flows for ip in f[:2]}}   # once per NIC
    up = [f for f in flows if leaf[f[0]] != leaf[f[1]]]
    ends = [(("src", leaf[f[0]]), ("dst", leaf[f[1]])) for f in up]
    allowed = [members(plan, f[0], f[1], groups) for f in up]
    if all(len(a) == k for a in allowed):
        colors = color_bipartite(ends, k)
    else:
        colors = _color_constrained(ends, allowed)
    crossing = set(up)
    out = {f: rng.randint(*PORT_RANGE) for f in flows if f not in crossing}
    used: set[int] = set()
    for f, spine, superspine in zip(up, colors, _super_colors(plan, up, colors)):
        out[f] = port_for_spine(plan, f[0], f[1], spine, rng.randint(*PORT_RANGE), used, groups, superspine)
        used.add(out[f])
    return out


def _leaf_of(plan: AddressPlan, ip: str) -> str:
    """The leaf of NIC address ``ip``, from the address's arithmetic (`nic_location`)
    rather than a whole `Nic` record: a 100k-GPU job asks it for every NIC."""
    try:                                 # inet_aton also takes "10.1": dotted quads only
        rail, block, index = nic_location(plan.spec, int.from_bytes(socket.inet_aton(ip), "big")) \
            if ip.count(".") == 3 else (-1, -1, -1)
    except OSError:
        rail = block = index = -1
    if not (0 <= rail < plan.spec.rails and 0 <= block < plan.spec.blocks
            and 0 <= index < plan.spec.servers_per_block):
        return plan.nic(ip).leaf         # not a NIC: the plan's own error
    return plan.leaf(block, rail).name


def _super_colors(plan: AddressPlan, flows: Sequence[tuple[str, ...]], spines: Sequence[int]
                  ) -> list[int | None]:
    """The super-spine of each flow that leaves its pod (None for the others): an edge
    colouring of (source pod's spine, destination pod's spine) edges, one colour per
    super-spine of the plane."""
    out: list[int | None] = [None] * len(flows)
    pods = [(plan.pod_of(plan.nic(f[0]).block), plan.pod_of(plan.nic(f[1]).block)) for f in flows]
    leaving = [i for i, (a, b) in enumerate(pods) if a != b]
    if not leaving:
        return out
    edges = [(("up", pods[i][0], spines[i]), ("down", pods[i][1], spines[i])) for i in leaving]
    for i, j in zip(leaving, color_bipartite(edges, plan.spec.super_spines)):
        out[i] = j
    return out


def _color_constrained(edges: Sequence[tuple[Hashable, Hashable]], allowed: Sequence[Sequence[int]]
                       ) -> list[int]:
    """Greedy colouring where edge e may only take colours ``allowed[e]``: the colour
    least used at both its ends (most constrained edges first)."""
    load: dict[tuple[Hashable, int], int] = defaultdict(int)
    color = [-1] * len(edges)
    for e in sorted(range(len(edges)), key=lambda e: len(allowed[e])):
        if not allowed[e]:
            raise ValueError(f"flow {edges[e]} has no spine left to cross (its ECMP group is empty)")
        u, v = edges[e]
        c = min(allowed[e], key=lambda c: (load[(u, c)] + load[(v, c)], c))
        color[e] = c
        load[(u, c)] += 1
        load[(v, c)] += 1
    return color


def port_for_spine(plan: AddressPlan, src: str, dst: str, spine: int, start: int,
                   avoid: set[int] | None = None, groups: Groups | None = None,
                   superspine: int | None = None) -> int:
    """The first dynamic port from ``start`` (wrapping around) that the source leaf's
    ECMP hash sends onto ``spine`` (and, across pods, that spine's onto ``superspine``);
    ports in ``avoid`` are skipped."""
    return source_port_for_spine(plan, FiveTuple(src, dst), spine, start, avoid or frozenset(),
                                 members(plan, src, dst, groups), superspine)


def uplink_of(plan: AddressPlan, src: str, dst: str, sport: int, groups: Groups | None = None) -> int | None:
    """The spine index a flow takes from its source leaf (None: same leaf, no uplink)."""
    if plan.nic(src).leaf == plan.nic(dst).leaf:
        return None
    return uplink(plan, FiveTuple(src, dst, sport=sport), members(plan, src, dst, groups))


def load_groups(path: str | Path) -> Groups | None:
    """The ECMP groups of GOR's published topology document (``gor-topology.json``),
    or None if there is none (then every spine is assumed up)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read GOR's topology document: {e}") from e
    groups = doc.get("groups")
    if not isinstance(groups, dict):
        raise ValueError(f"{path}: no `groups` mapping in GOR's topology document")
    return groups


def perfect_spread(plan: AddressPlan, trials: int) -> dict[str, float]:
    """Per port mode (``random``, ``orthogonal``), the share of ``trials`` in which the
    ``spines`` flows one leaf sends to another block take every uplink once -- from
    the hash model, which equals the switches bit for bit. Random ports should give
    k!/k^k (the stock library's collisions), orthogonal ones always 1 (`make bench`'s
    ``ports_*_perfect_frac``; docs/tccl.md)."""
    k = plan.spec.spines
    leaf = plan.leaves[0]
    srcs = [n for n in plan.nics() if n.leaf == leaf.name]
    dsts = [n for n in plan.nics() if n.block != leaf.block and n.rail == leaf.rail]
    flows = [(srcs[i % len(srcs)].ip, dsts[i % len(dsts)].ip) for i in range(k)]
    perfect = {"random": 0, "orthogonal": 0}
    for t in range(trials):
        for mode, assigned in (("random", random_ports(flows, seed=t)),
                               ("orthogonal", orthogonal_ports(plan, flows, seed=t))):
            perfect[mode] += len({uplink_of(plan, s, d, assigned[(s, d)]) for s, d in flows}) == k
    return {mode: n / trials for mode, n in perfect.items()}
