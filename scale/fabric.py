"""The fabric as integer arrays: every node and directed link numbered once, every NIC's
address, server, leaf and pod in a column, so that the paths of a million flows are a
few numpy operations, on two tiers or three.

The numbers come from the addressing plan (`topo.addressing`: NIC addresses by
`nic_address`, switches as the plan lists them), the choices of spine and super-spine
from the hash model (`topo.hashmodel.ecmp_indices` with each tier's algorithm and each
switch's salt, equal bit for bit to the scalar `uplink` / `spine_uplink` the switches
are tested against); a path is the node sequence `topo.hashmodel.path_via` names:
source server, leaf, [spine, [super-spine, spine,] leaf,] destination server.

Nodes: the servers in the plan's order (block by block), then the plan's switches
(leaves, spines, super-spines). NICs: the plan's order too (server by server, rail by
rail). Links are directed (full duplex), identified by ``a * nodes + b``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from controller.fairness import NONE
from topo.addressing import AddressPlan, ip_str, nic_address, nic_location
from topo.hashmodel import PORT_RANGE, FiveTuple, ecmp_indices, source_port_for_spine, tier_algorithm

# A path slot with no node (a shorter path: within one leaf, or one pod) holds NONE,
# the padding the max-min filling reads (`controller.fairness`).
# Node tiers: what a link between two of them is (host link, leaf-spine, spine-super-spine).
SERVER, LEAF, SPINE, SUPERSPINE = 0, 1, 2, 3
_TIER = {"leaf": LEAF, "spine": SPINE, "superspine": SUPERSPINE}


@dataclass(frozen=True)
class FlowPaths:
    """Paths of n flows: ``nodes`` (n, width) node numbers, NONE-padded at the end, and
    ``links`` (n, width - 1) directed link ids, NONE where the path is shorter."""

    nodes: np.ndarray
    links: np.ndarray

    @property
    def switch_hops(self) -> np.ndarray:
        """Switches each flow crosses (store-and-forward hops)."""
        return (self.nodes != NONE).sum(axis=1) - 2


class FabricIndex:
    """Node and link numbering of one addressing plan, and vectorised paths on it."""

    def __init__(self, plan: AddressPlan) -> None:
        self.plan = plan
        spec = plan.spec
        self.servers = spec.blocks * spec.servers_per_block
        switches = plan.switches
        self.switch_number = {sw.name: self.servers + k for k, sw in enumerate(switches)}
        self.tiers = np.array([SERVER] * self.servers + [_TIER[sw.role] for sw in switches], dtype=np.int64)
        self.salt = np.array([0] * self.servers + [sw.salt for sw in switches], dtype=np.uint64)
        # Switch numbers by position: leaf[block, rail], spine[pod, k], super-spine[k, j].
        self.leaf = np.zeros((spec.blocks, spec.rails), dtype=np.int64)
        self.spine = np.zeros((spec.pods, spec.spines), dtype=np.int64)
        self.superspine = np.zeros((spec.spines, max(1, spec.super_spines)), dtype=np.int64)
        for sw in switches:
            number = self.switch_number[sw.name]
            if sw.role == "leaf":
                self.leaf[sw.block, sw.rail] = number
            elif sw.role == "spine":
                self.spine[sw.pod, sw.spine] = number
            else:
                self.superspine[sw.spine, sw.superspine] = number
        # NIC k in the plan's order: block, server index, rail.
        k = np.arange(self.servers * spec.rails, dtype=np.int64)
        self.nic_block = k // (spec.servers_per_block * spec.rails)
        self.nic_index = k // spec.rails % spec.servers_per_block
        self.nic_rail = k % spec.rails
        self.nic_ip = nic_address(spec, self.nic_block, self.nic_index, self.nic_rail).astype(np.uint64)
        self.nic_server = self.nic_block * spec.servers_per_block + self.nic_index   # `AddressPlan.server_at`
        self.nic_leaf = self.leaf[self.nic_block, self.nic_rail]
        self.nic_pod = self.nic_block // spec.blocks_per_pod

    @property
    def nodes(self) -> int:
        return len(self.tiers)

    @property
    def width(self) -> int:
        """Nodes on the longest path: up and down every tier."""
        return 2 * self.plan.spec.tiers + 1

    def name(self, node: int) -> str:
        """The plan's name of node number ``node``."""
        if node < self.servers:
            return self.plan.servers[node].name
        return self.plan.switches[node - self.servers].name

    def number(self, name: str) -> int:
        """The node number of a switch or server name."""
        if name in self.switch_number:
            return self.switch_number[name]
        return next(k for k, s in enumerate(self.plan.servers) if s.name == name)

    def link_id(self, a: str, b: str) -> int:
        return self.number(a) * self.nodes + self.number(b)

    def link_name(self, link: int) -> tuple[str, str]:
        a, b = divmod(int(link), self.nodes)
        return self.name(a), self.name(b)

    def capacity_bps(self, links: np.ndarray) -> np.ndarray:
        """Line rate of directed links (ids): by the tiers they join."""
        rates = self.plan.spec.links
        a, b = np.divmod(np.asarray(links, dtype=np.int64), self.nodes)
        upper = np.maximum(self.tiers[a], self.tiers[b])
        by_tier = np.array([0.0, rates.host_mbps, rates.uplink_mbps, rates.spine_uplink_mbps]) * 1e6
        return by_tier[upper]

    @cached_property
    def fabric_links(self) -> np.ndarray:
        """Every directed link between switches (the ones ECMP chooses among), sorted."""
        spec = self.plan.spec
        leaf_spine = [(self.leaf[b, r], self.spine[b // spec.blocks_per_pod, k])
                      for b in range(spec.blocks) for r in range(spec.rails) for k in range(spec.spines)]
        spine_super = [(self.spine[p, k], self.superspine[k, j]) for p in range(spec.pods)
                       for k in range(spec.spines) for j in range(spec.super_spines)]
        pairs = np.array(leaf_spine + spine_super, dtype=np.int64).reshape(-1, 2)
        return np.sort(np.concatenate([pairs[:, 0] * self.nodes + pairs[:, 1],
                                       pairs[:, 1] * self.nodes + pairs[:, 0]]))

    def is_fabric(self, links: np.ndarray) -> np.ndarray:
        """Whether each link id joins two switches."""
        a, b = np.divmod(np.asarray(links, dtype=np.int64), self.nodes)
        return (self.tiers[a] != SERVER) & (self.tiers[b] != SERVER)

    def nics(self, ips: list[str]) -> np.ndarray:
        """NIC numbers of addresses (a KeyError names one that is no NIC of the fabric)."""
        spec = self.plan.spec
        addresses = np.array([int.from_bytes(bytes(int(o) for o in ip.split(".")), "big") for ip in ips],
                             dtype=np.int64)
        rail, block, index = nic_location(spec, addresses)
        nic = (block * spec.servers_per_block + index) * spec.rails + rail
        bad = (rail < 0) | (rail >= spec.rails) | (block < 0) | (block >= spec.blocks) | \
            (index < 0) | (index >= spec.servers_per_block)
        if bad.any():
            raise KeyError(f"{ips[int(np.argmax(bad))]} is not a NIC address of fabric {spec.name!r}")
        return nic

    def ip(self, nic: int) -> str:
        return ip_str(int(self.nic_ip[nic]))

    def choices(self, src: np.ndarray, dst: np.ndarray, sports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per flow (source NIC, destination NIC, UDP source port) the spine number its
        leaf sends it up to (NONE: both NICs on one leaf) and the super-spine number that
        spine sends it up to (NONE: within one pod); no failed cables."""
        spec = self.plan.spec
        up = self.nic_leaf[src] != self.nic_leaf[dst]
        spine = ecmp_indices(tier_algorithm(spec, "leaf"), self.salt[self.nic_leaf[src]], self.nic_ip[src],
                             self.nic_ip[dst], sports, spec.spines)
        spine = np.where(up, spine, NONE)
        across = up & (self.nic_pod[src] != self.nic_pod[dst])
        superspine = np.full(len(src), NONE, dtype=np.int64)
        if across.any():
            s, d = src[across], dst[across]
            at = self.spine[self.nic_pod[s], spine[across]]
            superspine[across] = ecmp_indices(tier_algorithm(spec, "spine"), self.salt[at], self.nic_ip[s],
                                              self.nic_ip[d], sports[across], spec.super_spines)
        return spine, superspine

    def paths(self, src: np.ndarray, dst: np.ndarray, sports: np.ndarray) -> FlowPaths:
        """The paths of flows from NIC ``src`` to NIC ``dst`` with UDP source ports
        ``sports`` (arrays of equal length)."""
        return self.paths_via(src, dst, *self.choices(src, dst, sports))

    def candidate_paths(self, src: np.ndarray, dst: np.ndarray) -> list[list[tuple[str, ...]]]:
        """Per flow NIC ``src`` -> NIC ``dst`` every path ECMP can give it (no failed
        cables), as node names, sorted: one per spine, across pods one per spine and
        super-spine of its plane -- `controller.paths.candidate_paths` for a whole job
        at once (GOR's planner in the model asks it of every spine-crossing flow)."""
        spec = self.plan.spec
        up = self.nic_leaf[src] != self.nic_leaf[dst]
        across = up & (self.nic_pod[src] != self.nic_pod[dst])
        names = np.array([self.name(n) for n in range(self.nodes)] + [""], dtype=object)   # NONE -> ""
        out: list[list[tuple[str, ...]]] = [[] for _ in range(len(src))]
        for k in range(spec.spines):
            for j in range(max(1, spec.super_spines)):
                spine = np.where(up, k, NONE)
                superspine = np.where(across, j, NONE)
                if j and not across.any():
                    break
                chosen = np.nonzero(across)[0] if j else np.arange(len(src))
                nodes = self.paths_via(src[chosen], dst[chosen], spine[chosen], superspine[chosen]).nodes
                for flow, row in zip(chosen.tolist(), names[nodes].tolist()):
                    path = tuple(n for n in row if n)
                    if path not in out[flow]:
                        out[flow].append(path)
        return [sorted(paths) for paths in out]

    def paths_via(self, src: np.ndarray, dst: np.ndarray, spine: np.ndarray, superspine: np.ndarray) -> FlowPaths:
        """The paths of flows from NIC ``src`` to NIC ``dst`` up spine number ``spine``
        (NONE: within one leaf) and super-spine number ``superspine`` (NONE: within one
        pod)."""
        up, across = spine != NONE, superspine != NONE
        within = up & ~across
        k = np.maximum(spine, 0)
        nodes = np.full((len(src), self.width), NONE, dtype=np.int64)
        nodes[:, 0] = self.nic_server[src]
        nodes[:, 1] = self.nic_leaf[src]
        nodes[~up, 2] = self.nic_server[dst[~up]]
        nodes[up, 2] = self.spine[self.nic_pod[src[up]], k[up]]
        nodes[within, 3] = self.nic_leaf[dst[within]]
        nodes[within, 4] = self.nic_server[dst[within]]
        if across.any():
            nodes[across, 3] = self.superspine[k[across], superspine[across]]
            nodes[across, 4] = self.spine[self.nic_pod[dst[across]], k[across]]
            nodes[across, 5] = self.nic_leaf[dst[across]]
            nodes[across, 6] = self.nic_server[dst[across]]
        a, b = nodes[:, :-1], nodes[:, 1:]
        links = np.where((a != NONE) & (b != NONE), a * self.nodes + b, NONE)
        return FlowPaths(nodes, links)

    def steer(self, src: np.ndarray, dst: np.ndarray, spine: np.ndarray, superspine: np.ndarray,
              start: np.ndarray) -> np.ndarray:
        """Per flow NIC ``src`` -> NIC ``dst`` the first UDP source port from ``start``
        (through `PORT_RANGE`, wrapping around) that its leaf sends up spine number
        ``spine`` and, where ``superspine`` is not NONE, that spine up that super-spine:
        `topo.hashmodel.source_port_for_spine` (no failed cables) for a whole job of
        moves at once. NONE where no port lands. With ECMP groups of a power of two a
        choice is the low bits of the CRC, and the CRC is linear over GF(2) --
        crc(flow with port p) = crc(flow with port 0) ^ crc(zeros with port p) ^
        crc(zeros) for inputs of one length -- so every port's contribution is one table
        of the range, bucketed by the choice it adds; other groups are searched flow by
        flow."""
        spec = self.plan.spec
        sizes = (spec.spines, max(1, spec.super_spines))
        if any(n & (n - 1) for n in sizes):
            return np.array([self._steer_one(*row) for row in zip(src.tolist(), dst.tolist(), spine.tolist(),
                                                                   superspine.tolist(), start.tolist())],
                            dtype=np.int64)
        lo, hi = PORT_RANGE
        ports = np.arange(lo, hi + 1, dtype=np.int64)
        at = self.spine[self.nic_pod[src], np.maximum(spine, 0)]
        key = np.zeros(len(src), dtype=np.int64)
        bucket = np.zeros(len(ports), dtype=np.int64)
        across = superspine != NONE
        for role, salts, want, size, mask in (("leaf", self.salt[self.nic_leaf[src]], spine, sizes[0], True),
                                              ("spine", self.salt[at], superspine, sizes[1], across)):
            algorithm = tier_algorithm(spec, role)
            zero = np.zeros(len(ports), dtype=np.uint64)
            added = ecmp_indices(algorithm, zero, zero, zero, ports, 1 << 16) ^ \
                ecmp_indices(algorithm, zero[:1], zero[:1], zero[:1], zero[:1], 1 << 16)
            base = ecmp_indices(algorithm, salts, self.nic_ip[src], self.nic_ip[dst],
                                np.zeros(len(src), dtype=np.int64), 1 << 16)
            # Port p lands flow f on ``want`` iff its added bits equal base ^ want there.
            key = key * size + np.where(mask, (base ^ want) & (size - 1), 0)
            bucket = bucket * size + (added & (size - 1))
            if role == "leaf":
                leaf_key, leaf_bucket = key.copy(), bucket.copy()
        found = np.full(len(src), NONE, dtype=np.int64)
        span = hi - lo + 1
        for keys, buckets, rows in ((key, bucket, across), (leaf_key, leaf_bucket, ~across)):
            table = np.sort(buckets * span + (ports - lo))
            want = keys[rows] * span
            first = np.searchsorted(table, want + (start[rows] - lo))
            wrap = np.searchsorted(table, want)
            hit = np.where((first < len(table)) & (table[np.minimum(first, len(table) - 1)] // span == keys[rows]),
                           first, wrap)
            ok = (hit < len(table)) & (table[np.minimum(hit, len(table) - 1)] // span == keys[rows])
            found[rows] = np.where(ok, lo + table[np.minimum(hit, len(table) - 1)] % span, NONE)
        return found

    def _steer_one(self, src: int, dst: int, spine: int, superspine: int, start: int) -> int:
        """`steer` of one flow by the hash model's own search (NONE: no port lands)."""
        flow = FiveTuple(self.ip(src), self.ip(dst))
        try:
            return source_port_for_spine(self.plan, flow, spine, start,
                                         superspine=None if superspine == NONE else superspine)
        except ValueError:
            return NONE
