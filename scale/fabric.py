"""The fabric as integer arrays: every node and directed link numbered once, every NIC's
address, server, leaf and ECMP salt in a column, so that the paths of a million flows
are a few numpy operations.

The numbers come from the addressing plan (`topo.addressing`), the choice of spine
from the hash model (`topo.hashmodel.ecmp_indices`, equal bit for bit to the scalar
`uplink` the switches are tested against); a path is the node sequence
`topo.hashmodel.path_via` names: source server, leaf, [spine, leaf,] destination
server. Links are directed (full duplex), identified by ``a * nodes + b``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from topo.addressing import AddressPlan
from topo.hashmodel import ecmp_indices

# A path slot with no node (a flow between NICs of one leaf skips the spine and the
# second leaf).
NONE = -1


@dataclass(frozen=True)
class FlowPaths:
    """Paths of n flows: ``nodes`` (n, hops + 1) node numbers, NONE-padded at the end,
    and ``links`` (n, hops) directed link ids, NONE where the path is shorter."""

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
        self.names: tuple[str, ...] = tuple(s.name for s in plan.servers) + \
            tuple(sw.name for sw in plan.switches)
        self.number = {name: k for k, name in enumerate(self.names)}
        nics = list(plan.nics())
        self.nic_ips: tuple[str, ...] = tuple(n.ip for n in nics)
        self.nic_of_ip = {ip: k for k, ip in enumerate(self.nic_ips)}
        self.nic_ip = np.array([int(ipaddress.IPv4Address(n.ip)) for n in nics], dtype=np.uint64)
        self.nic_server = np.array([self.number[n.server] for n in nics], dtype=np.int64)
        self.nic_leaf = np.array([self.number[n.leaf] for n in nics], dtype=np.int64)
        salts = {sw.name: sw.salt for sw in plan.leaves}
        self.nic_salt = np.array([salts[n.leaf] for n in nics], dtype=np.uint64)
        self.spine_node = np.array([self.number[s.name] for s in plan.spines], dtype=np.int64)

    @cached_property
    def tiers(self) -> np.ndarray:
        """Per node its level in the tree: servers 0, leaves 1, spines 2."""
        level = {"server": 0, "leaf": 1, "spine": 2}
        return np.array([0] * len(self.plan.servers) + [level[sw.role] for sw in self.plan.switches])

    @property
    def nodes(self) -> int:
        return len(self.names)

    def link_id(self, a: str, b: str) -> int:
        return self.number[a] * self.nodes + self.number[b]

    def link_name(self, link: int) -> tuple[str, str]:
        a, b = divmod(int(link), self.nodes)
        return self.names[a], self.names[b]

    @cached_property
    def capacity_bps(self) -> dict[int, float]:
        """Line rate of every directed link (both directions of every cable)."""
        out = {}
        for cable in self.plan.links:
            out[self.link_id(cable.a, cable.b)] = cable.mbps * 1e6
            out[self.link_id(cable.b, cable.a)] = cable.mbps * 1e6
        return out

    @cached_property
    def fabric_links(self) -> frozenset[int]:
        """The directed links between switches (the ones ECMP chooses among)."""
        switches = {sw.name for sw in self.plan.switches}
        return frozenset(self.link_id(c.a, c.b) for c in self.plan.links if c.a in switches) | \
            frozenset(self.link_id(c.b, c.a) for c in self.plan.links if c.a in switches)

    def nics(self, ips: list[str]) -> np.ndarray:
        """NIC numbers of addresses."""
        try:
            return np.array([self.nic_of_ip[ip] for ip in ips], dtype=np.int64)
        except KeyError as e:
            raise KeyError(f"{e.args[0]} is not a NIC address of fabric {self.plan.spec.name!r}") from None

    def spines_of(self, src: np.ndarray, dst: np.ndarray, sports: np.ndarray) -> np.ndarray:
        """The spine number each flow (source NIC, destination NIC, UDP source port)
        leaves its leaf by, NONE when both NICs are on one leaf (no failed cables)."""
        same = self.nic_leaf[src] == self.nic_leaf[dst]
        spine = ecmp_indices(self.plan.spec.ecmp_hash, self.nic_salt[src], self.nic_ip[src],
                             self.nic_ip[dst], sports, self.plan.spec.spines)
        return np.where(same, NONE, spine)

    def paths(self, src: np.ndarray, dst: np.ndarray, sports: np.ndarray) -> FlowPaths:
        """The paths of flows from NIC ``src`` to NIC ``dst`` with UDP source ports
        ``sports`` (arrays of equal length)."""
        spine = self.spines_of(src, dst, sports)
        up = spine != NONE
        nodes = np.full((len(src), 5), NONE, dtype=np.int64)
        nodes[:, 0] = self.nic_server[src]
        nodes[:, 1] = self.nic_leaf[src]
        nodes[:, 2] = np.where(up, self.spine_node[np.maximum(spine, 0)], self.nic_server[dst])
        nodes[up, 3] = self.nic_leaf[dst[up]]
        nodes[up, 4] = self.nic_server[dst[up]]
        a, b = nodes[:, :-1], nodes[:, 1:]
        links = np.where((a != NONE) & (b != NONE), a * self.nodes + b, NONE)
        return FlowPaths(nodes, links)
