"""The addressing plan: every name, number and address of a fabric, derived from its spec.

This module is the one place that decides them; the Mininet topology, the route
programming, GOR and the TCCL agents all ask an `AddressPlan` instead of recomputing:

* servers ``{prefix}b{block}h{server}``; NIC of rail r is interface ``<server>-eth{r}`` with
  address ``10.{rail}.{block}.{server+1}`` (/32: every packet goes through the leaf)
  and MAC ``02:00:0a:{rail}:{block}:{server+1}`` (the address in the low bytes);
* leaves ``{prefix}b{block}l{rail}``: switch id ``1 + block*rails + rail``; port
  ``server+1`` faces server ``server``, port ``servers_per_block + 1 + k`` faces spine k;
  the rail gateway ``10.{rail}.{block}.254`` is the leaf itself (its MAC);
* spines ``{prefix}sp{k}``: switch id ``leaves + 1 + k``; port ``1 + block*rails + rail``
  faces leaf (block, rail);
* every switch: MAC ``02:ff:00:00:{id>>8}:{id&255}``, P4Runtime device id = switch id,
  gRPC port ``grpc_port_base + id - 1`` on 127.0.0.1 (in cluster mode on the address
  of the switch's machine, `topo.placement`), ECMP salt `salt_of(id)`;
* the interface of any node's port p is ``<node>-eth{p}`` (`AddressPlan.intf`).

Pure data and pure functions: nothing here starts a process.
"""

from __future__ import annotations

import ipaddress
import zlib
from dataclasses import dataclass
from functools import cached_property
from typing import Iterator

import networkx as nx

from topo.placement import LOOPBACK, block_server, grpc_host, spine_server
from topo.spec import FabricSpec, validate

# Addresses of the fabric: 10.rail.block.host. Routes on spines are per (rail, block) /24.
FABRIC_NET = ipaddress.IPv4Network("10.0.0.0/8")
GATEWAY_HOST = 254
# The switch port number on which packets go to / come from the controller
# (standard in the P4 tutorials; the program's CPU_PORT).
CPU_PORT = 255
# Clone session that copies sampled packets to the CPU port (CPU_CLONE_SESSION in P4).
CPU_CLONE_SESSION = 100
# The ECMP group id every leaf uses for its spine uplinks.
UPLINK_GROUP = 1


def mac_str(value: int) -> str:
    """48-bit integer -> ``aa:bb:cc:dd:ee:ff``."""
    return ":".join(f"{(value >> s) & 0xFF:02x}" for s in range(40, -8, -8))


def salt_of(switch_id: int) -> int:
    """The per-switch ECMP salt: a fixed function of the switch id, different for every
    switch so that leaves and spines do not hash a flow alike (no polarization), and
    reproducible so that the hash model needs nothing but the plan."""
    return zlib.crc32(b"astral-ecmp-salt-%d" % switch_id)


@dataclass(frozen=True)
class Nic:
    """One server NIC: the host side of a host-leaf link."""

    server: str
    block: int
    index: int      # server number inside its block
    rail: int
    ip: str
    mac: str
    intf: str       # interface name inside the host (<server>-eth<rail>, Mininet's)
    port: int       # Mininet port number on the host (= rail)
    leaf: str
    leaf_port: int
    gateway_ip: str


@dataclass(frozen=True)
class Server:
    name: str
    block: int
    index: int
    nics: tuple[Nic, ...]


@dataclass(frozen=True)
class SwitchInfo:
    """One P4 switch of the fabric (role ``leaf`` or ``spine``)."""

    name: str
    role: str
    switch_id: int
    mac: str
    salt: int
    grpc_port: int
    block: int | None = None    # leaves only
    rail: int | None = None     # leaves only
    spine: int | None = None    # spines only
    grpc_host: str = LOOPBACK   # where its P4Runtime server listens (`topo.placement.grpc_host`)

    @property
    def device_id(self) -> int:
        return self.switch_id

    @property
    def grpc_address(self) -> str:
        return f"{self.grpc_host}:{self.grpc_port}"


@dataclass(frozen=True)
class Link:
    """A cable: ``a``'s port ``a_port`` to ``b``'s port ``b_port`` at ``mbps``."""

    a: str
    a_port: int
    b: str
    b_port: int
    mbps: float


class AddressPlan:
    """Names, ids, ports and addresses of one fabric spec."""

    def __init__(self, spec: FabricSpec) -> None:
        validate(spec)
        self.spec = spec
        p = spec.node_prefix
        self.leaves: tuple[SwitchInfo, ...] = tuple(
            self._switch(f"{p}b{b}l{r}", "leaf", 1 + b * spec.rails + r, block=b, rail=r)
            for b in range(spec.blocks) for r in range(spec.rails))
        self.spines: tuple[SwitchInfo, ...] = tuple(
            self._switch(f"{p}sp{k}", "spine", spec.leaves + 1 + k, spine=k)
            for k in range(spec.spines))
        self.servers: tuple[Server, ...] = tuple(
            Server(f"{p}b{b}h{s}", b, s, tuple(self._nic(b, s, r) for r in range(spec.rails)))
            for b in range(spec.blocks) for s in range(spec.servers_per_block))
        self._switches = {sw.name: sw for sw in self.switches}
        self._nics = {nic.ip: nic for server in self.servers for nic in server.nics}

    def _switch(self, name: str, role: str, switch_id: int, **where: int) -> SwitchInfo:
        machine = (block_server(self.spec, where["block"]) if role == "leaf"
                   else spine_server(self.spec, where["spine"]))
        return SwitchInfo(name=name, role=role, switch_id=switch_id,
                          mac=mac_str(0x02FF00000000 | switch_id), salt=salt_of(switch_id),
                          grpc_port=self.spec.grpc_port_base + switch_id - 1,
                          grpc_host=grpc_host(machine), **where)

    def _nic(self, block: int, index: int, rail: int) -> Nic:
        host = index + 1
        leaf = self.leaf(block, rail)
        server = f"{self.spec.node_prefix}b{block}h{index}"
        return Nic(server=server, block=block, index=index, rail=rail, ip=f"10.{rail}.{block}.{host}",
                   mac=mac_str(0x02000A000000 | rail << 16 | block << 8 | host),
                   intf=self.intf(server, rail), port=rail, leaf=leaf.name, leaf_port=host,
                   gateway_ip=f"10.{rail}.{block}.{GATEWAY_HOST}")

    # --- lookups -----------------------------------------------------------------

    @property
    def switches(self) -> tuple[SwitchInfo, ...]:
        return self.leaves + self.spines

    def switch(self, name: str) -> SwitchInfo:
        try:
            return self._switches[name]
        except KeyError:
            raise KeyError(f"no switch named {name!r} in fabric {self.spec.name!r}") from None

    def leaf(self, block: int, rail: int) -> SwitchInfo:
        return self.leaves[block * self.spec.rails + rail]

    def nic(self, ip: str) -> Nic:
        """The NIC that owns address ``ip``."""
        try:
            return self._nics[ip]
        except KeyError:
            raise KeyError(f"{ip} is not a NIC address of fabric {self.spec.name!r}") from None

    def nics(self) -> Iterator[Nic]:
        for server in self.servers:
            yield from server.nics

    def server(self, name: str) -> Server:
        for server in self.servers:
            if server.name == name:
                return server
        raise KeyError(f"no server named {name!r} in fabric {self.spec.name!r}")

    def server_at(self, block: int, index: int) -> Server:
        """Server number ``index`` of block ``block``."""
        return self.servers[block * self.spec.servers_per_block + index]

    def uplink_port(self, spine: int) -> int:
        """Leaf port facing spine number ``spine``."""
        return self.spec.servers_per_block + 1 + spine

    def spine_port(self, block: int, rail: int) -> int:
        """Spine port facing the leaf of (``block``, ``rail``)."""
        return 1 + block * self.spec.rails + rail

    def intf(self, node: str, port: int) -> str:
        """The interface of ``node``'s port ``port`` (Mininet's naming, which the
        topology asks for by name; a switch's interfaces are in the root namespace)."""
        return f"{node}-eth{port}"

    def rail_block_subnet(self, rail: int, block: int) -> str:
        """The /24 of the NICs of one rail in one block (a spine's route to a leaf)."""
        return f"10.{rail}.{block}.0/24"

    def leaf_ports(self, leaf: SwitchInfo) -> dict[int, float]:
        """Port number -> line rate (Mbit/s) of every data port of a leaf."""
        ports = {s + 1: self.spec.links.host_mbps for s in range(self.spec.servers_per_block)}
        ports.update({self.uplink_port(k): self.spec.links.uplink_mbps for k in range(self.spec.spines)})
        return ports

    def port_rates(self, name: str) -> dict[int, float]:
        """Port number -> line rate (Mbit/s) of every data port of switch ``name``."""
        sw = self.switch(name)
        if sw.role == "leaf":
            return self.leaf_ports(sw)
        return {self.spine_port(leaf.block, leaf.rail): self.spec.links.uplink_mbps
                for leaf in self.leaves}

    @cached_property
    def links(self) -> tuple[Link, ...]:
        """Every cable: NIC-leaf links, then leaf-spine links."""
        out = [Link(nic.server, nic.port, nic.leaf, nic.leaf_port, self.spec.links.host_mbps)
               for nic in self.nics()]
        for leaf in self.leaves:
            for k, spine in enumerate(self.spines):
                out.append(Link(leaf.name, self.uplink_port(k), spine.name,
                                self.spine_port(leaf.block, leaf.rail), self.spec.links.uplink_mbps))
        return tuple(out)

    def peer(self, node: str, port: int) -> tuple[str, int]:
        """What is at the other end of ``node``'s port ``port``: (node, port)."""
        for link in self.links:
            if (link.a, link.a_port) == (node, port):
                return link.b, link.b_port
            if (link.b, link.b_port) == (node, port):
                return link.a, link.a_port
        raise KeyError(f"{node} has no port {port}")

    def graph(self) -> nx.Graph:
        """The topology as an undirected graph that the controller and agents reuse.

        Nodes carry ``role`` (server/leaf/spine) and the plan's record (``info``);
        every edge carries ``ports`` ({node: port number}) and ``mbps``.
        """
        g = nx.Graph(name=self.spec.name)
        for server in self.servers:
            g.add_node(server.name, role="server", info=server)
        for sw in self.switches:
            g.add_node(sw.name, role=sw.role, info=sw)
        for link in self.links:
            g.add_edge(link.a, link.b, ports={link.a: link.a_port, link.b: link.b_port},
                       mbps=link.mbps)
        return g
