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

import itertools
import json
import random
import socket
from collections import defaultdict
from pathlib import Path
from typing import Hashable, Iterable, Mapping, Sequence

import numpy as np

from topo.addressing import AddressPlan, nic_location
from topo.hashmodel import PORT_RANGE, FiveTuple, ecmp_indices, source_port_for_spine, tier_algorithm, uplink


def random_ports(flows: Iterable[tuple[int, int]], seed: int | str) -> dict[tuple[int, int], int]:
    """A uniformly random dynamic port per flow (seeded: every agent draws the same)."""
    flows = list(flows)
    return dict(zip(flows, draw_ports(random.Random(f"ports/{seed}"), len(flows)).tolist()))


def draw_ports(rng: random.Random, n: int) -> np.ndarray:
    """``[rng.randint(*PORT_RANGE) for _ in range(n)]``, the same numbers from the same
    generator state, drawn as blocks of 32-bit words (a 100k-GPU job draws 600 000):
    CPython's randint over a range of 2**14 takes one word per try, keeps its top 15
    bits and retries above the range, and getrandbits(32 m) is m such words, the first
    the least significant. The generator is left past whole blocks, not where randint
    would leave it: draw what one seed gives in one call."""
    lo, hi = PORT_RANGE
    span = hi - lo + 1
    bits = span.bit_length()
    kept: list[np.ndarray] = []
    while (have := sum(len(k) for k in kept)) < n:
        words = 2 * (n - have) + 64
        block = np.frombuffer(rng.getrandbits(32 * words).to_bytes(4 * words, "little"), dtype="<u4")
        tries = block >> np.uint32(32 - bits)
        kept.append(tries[tries < span])
    return lo + np.concatenate(kept or [np.zeros(0, np.uint32)])[:n].astype(np.int64)


def color_bipartite(edges: Sequence[tuple[Hashable, Hashable]], k: int) -> list[int]:
    """A colour in 0..k-1 per edge (u, v) of a bipartite multigraph (u and v from
    disjoint sides) so that edges sharing a vertex differ wherever degrees allow."""
    if k < 1:
        raise ValueError(f"need at least one colour, got {k}")
    color: list[int] = [-1] * len(edges)
    at: dict[Hashable, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))

    def free(node: Hashable) -> list[int]:
        taken = at[node]                 # .get: no empty list made per colour and call
        return [c for c in range(k) if not taken.get(c)]

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
    leaf = _leaves_of(plan, {ip for f in flows for ip in f[:2]})                      # once per NIC
    up = [f for f in flows if leaf[f[0]] != leaf[f[1]]]
    ends = [(("src", leaf[f[0]]), ("dst", leaf[f[1]])) for f in up]
    allowed = [members(plan, f[0], f[1], groups) for f in up]
    if all(len(a) == k for a in allowed):
        colors = color_bipartite(ends, k)
    else:
        colors = _color_constrained(ends, allowed)
    crossing = set(up)
    staying = [f for f in flows if f not in crossing]
    drawn = draw_ports(rng, len(staying) + len(up)).tolist()    # one draw: see draw_ports
    out = dict(zip(staying, drawn))
    starts = drawn[len(staying):]
    supers = _super_colors(plan, up, colors)
    if groups is None and _power_of_two(plan.spec.spines) and _power_of_two(max(1, plan.spec.super_spines)):
        out.update(zip(up, _distinct_ports_onto(plan, up, colors, supers, starts)))
        return out
    used: set[int] = set()
    for f, spine, superspine, start in zip(up, colors, supers, starts):
        out[f] = port_for_spine(plan, f[0], f[1], spine, start, used, groups, superspine)
        used.add(out[f])
    return out


def _power_of_two(n: int) -> bool:
    return n > 0 and not n & (n - 1)


def _distinct_ports_onto(plan: AddressPlan, flows: Sequence[tuple[str, ...]], spines: Sequence[int],
                         supers: Sequence[int | None], starts: Sequence[int]) -> list[int]:
    """`port_for_spine` of every flow in turn, each from its own start and avoiding the
    ports taken before it (no failed cable) -- the same ports, from one table of the
    range instead of a hash search per flow (at 100k GPUs 6 400 searches were most of
    the orthogonal plan). With ECMP groups of a power of two a member is the CRC's low
    bits, and the CRC is linear over GF(2): crc(flow with port p) = crc(flow with port
    0) ^ crc(zeros with port p) ^ crc(zeros) for inputs of one length, so a port lands
    a flow on its spine (and super-spine) iff the bits port p adds equal the flow's own
    bits ^ the wanted member: the range, bucketed by those added bits and sorted, gives
    each flow its landing ports in search order (from its start, wrapping)."""
    spec = plan.spec
    lo, hi = PORT_RANGE
    span = hi - lo + 1
    ports = np.arange(lo, hi + 1, dtype=np.int64)
    where = {ip: _location(plan, ip) for ip in {ip for f in flows for ip in f[:2]}}
    src = np.array([_ip_int(f[0]) for f in flows], dtype=np.uint64)
    dst = np.array([_ip_int(f[1]) for f in flows], dtype=np.uint64)
    spine = np.asarray(spines, dtype=np.int64)
    across = np.array([s is not None for s in supers], dtype=bool)
    superspine = np.array([-1 if s is None else s for s in supers], dtype=np.int64)
    leaf_salt = np.array([plan.leaf(*where[f[0]][:2]).salt for f in flows], dtype=np.uint64)
    spine_salt = np.array([plan.spine(plan.pod_of(where[f[0]][0]), k).salt for f, k in zip(flows, spines)],
                          dtype=np.uint64)
    zero = np.zeros(span, dtype=np.uint64)
    keys, buckets = np.zeros(len(flows), dtype=np.int64), np.zeros(span, dtype=np.int64)
    tiers = []
    for role, salts, want, size, mask in (("leaf", leaf_salt, spine, spec.spines, np.ones(len(flows), bool)),
                                          ("spine", spine_salt, superspine, max(1, spec.super_spines), across)):
        algorithm = tier_algorithm(spec, role)
        added = ecmp_indices(algorithm, zero, zero, zero, ports, 1 << 16) ^ \
            ecmp_indices(algorithm, zero[:1], zero[:1], zero[:1], zero[:1], 1 << 16)
        base = ecmp_indices(algorithm, salts, src, dst, np.zeros(len(flows), dtype=np.int64), 1 << 16)
        keys = keys * size + np.where(mask, (base ^ want) & (size - 1), 0)
        buckets = buckets * size + (added & (size - 1))
        tiers.append((keys.copy(), buckets.copy()))
    (leaf_keys, leaf_buckets), (both_keys, both_buckets) = tiers
    key = np.where(across, both_keys, leaf_keys)
    tables = {kind: np.sort(b * span + (ports - lo)) for kind, b in ((True, both_buckets), (False, leaf_buckets))}
    listed = {kind: t.tolist() for kind, t in tables.items()}
    begin, first, end = {}, {}, {}
    for kind, table in tables.items():
        rows = across == kind
        begin[kind] = np.searchsorted(table, key * span)
        first[kind] = np.searchsorted(table, key * span + (np.asarray(starts, dtype=np.int64) - lo))
        end[kind] = np.searchsorted(table, (key + 1) * span)
        for d in (begin, first, end):
            d[kind] = np.where(rows, d[kind], 0).tolist()
    used: set[int] = set()
    out = []
    for i, f in enumerate(flows):
        kind = bool(across[i])
        table = listed[kind]
        a, b, c = begin[kind][i], first[kind][i], end[kind][i]
        for j in itertools.chain(range(b, c), range(a, b)):
            port = lo + table[j] % span
            if port not in used:
                break
        else:
            target = f"spine {spines[i]}" + ("" if supers[i] is None else f", super-spine {supers[i]}")
            raise ValueError(f"no UDP source port in {lo}..{hi} maps {f[0]}->{f[1]} onto {target}")
        used.add(port)
        out.append(port)
    return out


def _ip_int(ip: str) -> int:
    return int.from_bytes(socket.inet_aton(ip), "big")


def _location(plan: AddressPlan, ip: str) -> tuple[int, int]:
    """(block, rail) of NIC address ``ip`` (from the address's arithmetic)."""
    value = _ip_value(ip)
    rail, block, index = nic_location(plan.spec, value) if value >= 0 else (-1, -1, -1)
    if not (0 <= rail < plan.spec.rails and 0 <= block < plan.spec.blocks
            and 0 <= index < plan.spec.servers_per_block):
        nic = plan.nic(ip)               # not a NIC: the plan's own error
        return nic.block, nic.rail
    return block, rail


def _leaves_of(plan: AddressPlan, ips: Iterable[str]) -> dict[str, str]:
    """`_leaf_of` of many addresses: the arithmetic over one array (a 100k-GPU job has
    102 400 NICs), each address that is not a NIC's by `_leaf_of` (its error)."""
    ips = list(ips)
    spec = plan.spec
    ints = np.array([_ip_value(ip) for ip in ips], dtype=np.int64)
    rail, block, index = nic_location(spec, ints)
    ok = (ints >= 0) & (rail >= 0) & (rail < spec.rails) & (block >= 0) & (block < spec.blocks) & \
        (index >= 0) & (index < spec.servers_per_block)
    names = [leaf.name for leaf in plan.leaves]
    at = (block * spec.rails + rail).tolist()
    return {ip: names[a] if good else _leaf_of(plan, ip) for ip, a, good in zip(ips, at, ok.tolist())}


def _ip_value(ip: str) -> int:
    """A dotted quad's number, -1 for anything else (inet_aton also takes "10.1")."""
    if ip.count(".") != 3:
        return -1
    try:
        return _ip_int(ip)
    except OSError:
        return -1


def _leaf_of(plan: AddressPlan, ip: str) -> str:
    """The leaf of NIC address ``ip``, from the address's arithmetic (`_location`)
    rather than a whole `Nic` record: a 100k-GPU job asks it for every NIC."""
    return plan.leaf(*_location(plan, ip)).name


def _super_colors(plan: AddressPlan, flows: Sequence[tuple[str, ...]], spines: Sequence[int]
                  ) -> list[int | None]:
    """The super-spine of each flow that leaves its pod (None for the others): an edge
    colouring of (source pod's spine, destination pod's spine) edges, one colour per
    super-spine of the plane."""
    out: list[int | None] = [None] * len(flows)
    pods = [(plan.pod_of(_location(plan, f[0])[0]), plan.pod_of(_location(plan, f[1])[0])) for f in flows]
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
