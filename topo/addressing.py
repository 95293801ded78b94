"""The addressing plan: every name, number and address of a fabric, derived from its spec.

This module is the one place that decides them; the Mininet topology, the route
programming, GOR and the TCCL agents all ask an `AddressPlan` instead of recomputing:

* servers ``{prefix}b{block}h{server}``; NIC of rail r is interface ``<server>-eth{r}`` with
  address ``10.{rail}.{block}.{server+1}`` (/32: every packet goes through the leaf)
  and MAC ``02:00:0a:{rail}:{block}:{server+1}`` (the address in the low bytes); a fabric
  of more than 256 blocks widens the block field into the rail's octet (`nic_address`);
* leaves ``{prefix}b{block}l{rail}``: switch id ``1 + block*rails + rail``; port
  ``server+1`` faces server ``server``, port ``servers_per_block + 1 + k`` faces spine k
  of its pod; the rail gateway ``10.{rail}.{block}.254`` is the leaf itself (its MAC);
* blocks ``pod*blocks_per_pod`` .. ``+blocks_per_pod-1`` form pod ``pod``;
* spines ``{prefix}sp{n}``, n = ``pod*spines + k`` (spine k of its pod, plane k): switch id
  ``leaves + 1 + n``; port ``1 + (block % blocks_per_pod)*rails + rail`` faces leaf
  (block, rail), port ``1 + blocks_per_pod*rails + j`` faces super-spine j of plane k;
* super-spines (three tiers) ``{prefix}ss{m}``, m = ``k*super_spines + j`` (super-spine j
  of plane k): switch id ``leaves + pods*spines + 1 + m``; port ``1 + pod`` faces spine k
  of that pod;
* every switch: MAC ``02:ff:00:00:{id>>8}:{id&255}``, P4Runtime device id = switch id,
  gRPC port ``grpc_port_base + id - 1`` on 127.0.0.1 (in cluster mode on the address
  of the switch's machine, `topo.placement`), ECMP salt `salt_of(id)`;
* the interface of any node's port p is ``<node>-eth{p}`` (`AddressPlan.intf`).

A two-tier spec (one pod, no super-spines) gets exactly the names and numbers it always
had. Pure data and pure functions: nothing here starts a process. Servers and NICs are
made when first asked for; `nic_address` and `nic_location` are plain arithmetic that
works on ints and numpy arrays alike, for models of fabrics too large for one object
per NIC.
"""

from __future__ import annotations

import ipaddress
import socket
import zlib
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterator

from topo.placement import LOOPBACK, block_server, grpc_host, switch_server
from topo.spec import HOST_BITS, FabricSpec, validate

if TYPE_CHECKING:
    import networkx as nx

# Addresses of the fabric: 10.rail.block.host. Routes on spines are per (rail, block) /24.
FABRIC_NET = ipaddress.IPv4Network("10.0.0.0/8")
GATEWAY_HOST = 254
# The switch port number on which packets go to / come from the controller
# (standard in the P4 tutorials; the program's CPU_PORT).
CPU_PORT = 255
# Clone session that copies sampled packets to the CPU port (CPU_CLONE_SESSION in P4).
CPU_CLONE_SESSION = 100
# The ECMP group id every leaf uses for its spine uplinks (and every spine of a
# three-tier fabric for its super-spine uplinks).
UPLINK_GROUP = 1
_FABRIC_BASE = int(FABRIC_NET.network_address)
# The NIC MAC is this OUI-like prefix with the NIC's offset in 10.0.0.0/8 below it.
_NIC_MAC_BASE = 0x02000A000000


def nic_address(spec: FabricSpec, block: Any, index: Any, rail: Any) -> Any:
    """The IPv4 address (as an integer) of rail ``rail``'s NIC of server ``index`` of
    block ``block``: 10.0.0.0 + (rail, block, index + 1) packed with `FabricSpec.block_bits`
    bits for the block (10.rail.block.host when blocks fit an octet). Arguments may be
    numpy arrays."""
    return _FABRIC_BASE + ((((rail << spec.block_bits) | block) << HOST_BITS) | (index + 1))


def nic_location(spec: FabricSpec, address: Any) -> tuple[Any, Any, Any]:
    """(rail, block, server index) of a NIC address given as an integer (or an array)."""
    offset = address - _FABRIC_BASE
    return (offset >> (HOST_BITS + spec.block_bits), (offset >> HOST_BITS) & ((1 << spec.block_bits) - 1),
            (offset & ((1 << HOST_BITS) - 1)) - 1)


def ip_str(address: int) -> str:
    """Integer -> dotted quad (`ipaddress`'s text, a third of its time: a 100k-GPU
    plan formats 200 000 of them)."""
    return socket.inet_ntoa(address.to_bytes(4, "big"))


def mac_str(value: int) -> str:
    """48-bit integer -> ``aa:bb:cc:dd:ee:ff``."""
    return value.to_bytes(6, "big").hex(":")


def salt_of(switch_id: int) -> int:
    """The per-switch ECMP salt: a fixed function of the switch id, reproducible so that
    the hash model needs nothing but the plan. A salt prefixed to a CRC's input only
    XORs a constant onto the CRC (CRC is linear), so it reorders a switch's members and
    cannot decorrelate two tiers: that is the per-tier algorithm's job
    (`topo.hashmodel.tier_algorithm`)."""
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
    """One P4 switch of the fabric (role ``leaf``, ``spine`` or ``superspine``)."""

    name: str
    role: str
    switch_id: int
    mac: str
    salt: int
    grpc_port: int
    block: int | None = None    # leaves only
    rail: int | None = None     # leaves only
    spine: int | None = None    # spines: number in the pod; super-spines: the plane
    pod: int | None = None      # leaves and spines
    superspine: int | None = None   # super-spines only: number in the plane
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
    """Names, ids, ports and addresses of one fabric spec (``emulated``: see
    `topo.spec.validate`)."""

    def __init__(self, spec: FabricSpec, emulated: bool = True) -> None:
        validate(spec, emulated=emulated)
        self.spec = spec
        p = spec.node_prefix
        self.leaves: tuple[SwitchInfo, ...] = tuple(
            self._switch(f"{p}b{b}l{r}", "leaf", 1 + b * spec.rails + r, block=b, rail=r,
                         pod=b // spec.blocks_per_pod)
            for b in range(spec.blocks) for r in range(spec.rails))
        self.spines: tuple[SwitchInfo, ...] = tuple(
            self._switch(f"{p}sp{pod * spec.spines + k}", "spine", spec.leaves + 1 + pod * spec.spines + k,
                         spine=k, pod=pod)
            for pod in range(spec.pods) for k in range(spec.spines))
        first = spec.leaves + spec.spine_switches + 1
        self.super_spines: tuple[SwitchInfo, ...] = tuple(
            self._switch(f"{p}ss{k * spec.super_spines + j}", "superspine", first + k * spec.super_spines + j,
                         spine=k, superspine=j)
            for k in range(spec.spines) for j in range(spec.super_spines))
        self._switches = {sw.name: sw for sw in self.switches}

    def _switch(self, name: str, role: str, switch_id: int, **where: int) -> SwitchInfo:
        machine = switch_server(self.spec, role, where.get("block"), where.get("pod"),
                                where.get("spine"), where.get("superspine"))
        return SwitchInfo(name=name, role=role, switch_id=switch_id,
                          mac=mac_str(0x02FF00000000 | switch_id), salt=salt_of(switch_id),
                          grpc_port=self.spec.grpc_port_base + switch_id - 1,
                          grpc_host=grpc_host(machine), **where)

    def _nic(self, block: int, index: int, rail: int) -> Nic:
        address = nic_address(self.spec, block, index, rail)
        server = f"{self.spec.node_prefix}b{block}h{index}"
        return Nic(server=server, block=block, index=index, rail=rail, ip=ip_str(address),
                   mac=mac_str(_NIC_MAC_BASE | (address - _FABRIC_BASE)),
                   intf=self.intf(server, rail), port=rail, leaf=self.leaf(block, rail).name,
                   leaf_port=index + 1, gateway_ip=ip_str(address - index - 1 + GATEWAY_HOST))

    # --- lookups -----------------------------------------------------------------

    @cached_property
    def servers(self) -> tuple[Server, ...]:
        """Every server, block by block (made on first use)."""
        spec, p = self.spec, self.spec.node_prefix
        return tuple(Server(f"{p}b{b}h{s}", b, s, tuple(self._nic(b, s, r) for r in range(spec.rails)))
                     for b in range(spec.blocks) for s in range(spec.servers_per_block))

    @property
    def switches(self) -> tuple[SwitchInfo, ...]:
        return self.leaves + self.spines + self.super_spines

    def switch(self, name: str) -> SwitchInfo:
        try:
            return self._switches[name]
        except KeyError:
            raise KeyError(f"no switch named {name!r} in fabric {self.spec.name!r}") from None

    def leaf(self, block: int, rail: int) -> SwitchInfo:
        return self.leaves[block * self.spec.rails + rail]

    def pod_of(self, block: int) -> int:
        """The pod of block ``block``."""
        return block // self.spec.blocks_per_pod

    def spine(self, pod: int, k: int) -> SwitchInfo:
        """Spine number ``k`` of pod ``pod`` (plane k)."""
        return self.spines[pod * self.spec.spines + k]

    def super_spine(self, plane: int, j: int) -> SwitchInfo:
        """Super-spine number ``j`` of spine plane ``plane``."""
        return self.super_spines[plane * self.spec.super_spines + j]

    def nic(self, ip: str) -> Nic:
        """The NIC that owns address ``ip`` (computed from the address, not looked up)."""
        spec = self.spec
        try:
            address = int(ipaddress.IPv4Address(ip))
        except ValueError:
            address = -1
        rail, block, index = nic_location(spec, address)
        if not (address >= _FABRIC_BASE and 0 <= rail < spec.rails and 0 <= block < spec.blocks
                and 0 <= index < spec.servers_per_block and address < _FABRIC_BASE + FABRIC_NET.num_addresses):
            raise KeyError(f"{ip} is not a NIC address of fabric {spec.name!r}")
        return self._nic(block, index, rail)

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
        """Leaf port facing spine number ``spine`` of its pod."""
        return self.spec.servers_per_block + 1 + spine

    def spine_port(self, block: int, rail: int) -> int:
        """Spine port facing the leaf of (``block``, ``rail``)."""
        return 1 + (block % self.spec.blocks_per_pod) * self.spec.rails + rail

    def spine_uplink_port(self, superspine: int) -> int:
        """Spine port facing super-spine number ``superspine`` of its plane."""
        return 1 + self.spec.blocks_per_pod * self.spec.rails + superspine

    def super_port(self, pod: int) -> int:
        """Super-spine port facing (the spine of its plane in) pod ``pod``."""
        return 1 + pod

    def intf(self, node: str, port: int) -> str:
        """The interface of ``node``'s port ``port`` (Mininet's naming, which the
        topology asks for by name; a switch's interfaces are in the root namespace)."""
        return f"{node}-eth{port}"

    def rail_block_subnet(self, rail: int, block: int) -> str:
        """The /24 of the NICs of one rail in one block (a spine's route to a leaf)."""
        return f"{ip_str(nic_address(self.spec, block, -1, rail))}/{32 - HOST_BITS}"

    def rail_subnet(self, rail: int) -> str:
        """The prefix of every NIC of one rail (a host's route out of that rail's NIC)."""
        first = nic_address(self.spec, 0, -1, rail)
        return f"{ip_str(first)}/{32 - HOST_BITS - self.spec.block_bits}"

    def pod_subnets(self, rail: int, pod: int) -> tuple[str, ...]:
        """The fewest prefixes that hold the NICs of one rail in one pod (a super-spine's
        routes to that pod): one when blocks per pod is a power of two."""
        spec = self.spec
        first = pod * spec.blocks_per_pod
        lo = ipaddress.IPv4Address(nic_address(spec, first, -1, rail))
        hi = ipaddress.IPv4Address(nic_address(spec, first + spec.blocks_per_pod, -1, rail) - 1)
        return tuple(str(net) for net in ipaddress.summarize_address_range(lo, hi))

    def leaf_ports(self, leaf: SwitchInfo) -> dict[int, float]:
        """Port number -> line rate (Mbit/s) of every data port of a leaf."""
        ports = {s + 1: self.spec.links.host_mbps for s in range(self.spec.servers_per_block)}
        ports.update({self.uplink_port(k): self.spec.links.uplink_mbps for k in range(self.spec.spines)})
        return ports

    def port_rates(self, name: str) -> dict[int, float]:
        """Port number -> line rate (Mbit/s) of every data port of switch ``name``."""
        sw, links = self.switch(name), self.spec.links
        if sw.role == "leaf":
            return self.leaf_ports(sw)
        if sw.role == "superspine":
            return {self.super_port(pod): links.spine_uplink_mbps for pod in range(self.spec.pods)}
        ports = {self.spine_port(leaf.block, leaf.rail): links.uplink_mbps
                 for leaf in self.leaves if leaf.pod == sw.pod}
        ports.update({self.spine_uplink_port(j): links.spine_uplink_mbps
                      for j in range(self.spec.super_spines)})
        return ports

    @cached_property
    def links(self) -> tuple[Link, ...]:
        """Every cable: NIC-leaf links, then leaf-spine links, then spine-super-spine links."""
        rates = self.spec.links
        out = [Link(nic.server, nic.port, nic.leaf, nic.leaf_port, rates.host_mbps)
               for nic in self.nics()]
        for leaf in self.leaves:
            for k in range(self.spec.spines):
                out.append(Link(leaf.name, self.uplink_port(k), self.spine(leaf.pod, k).name,
                                self.spine_port(leaf.block, leaf.rail), rates.uplink_mbps))
        for spine in self.spines:
            for j in range(self.spec.super_spines):
                out.append(Link(spine.name, self.spine_uplink_port(j), self.super_spine(spine.spine, j).name,
                                self.super_port(spine.pod), rates.spine_uplink_mbps))
        return tuple(out)

    @property
    def switch_links(self) -> tuple[Link, ...]:
        """The cables between two switches (leaf-spine, spine-super-spine): the fabric
        links whose load GOR can change by moving flows."""
        return self.links[self.spec.blocks * self.spec.servers_per_block * self.spec.rails:]

    def peer(self, node: str, port: int) -> tuple[str, int]:
        """What is at the other end of ``node``'s port ``port``: (node, port)."""
        for link in self.links:
            if (link.a, link.a_port) == (node, port):
                return link.b, link.b_port
            if (link.b, link.b_port) == (node, port):
                return link.a, link.a_port
        raise KeyError(f"{node} has no port {port}")

    def node_servers(self) -> dict[str, str]:
        """Node name -> machine (`topo.placement`), for every server and switch."""
        placed = {server.name: block_server(self.spec, server.block) for server in self.servers}
        placed.update({sw.name: switch_server(self.spec, sw.role, sw.block, sw.pod, sw.spine, sw.superspine)
                       for sw in self.switches})
        return placed

    def crossing_links(self) -> tuple[Link, ...]:
        """The cables whose two ends are on different machines (all above the leaves)."""
        placed = self.node_servers()
        return tuple(link for link in self.links if placed[link.a] != placed[link.b])

    def graph(self) -> nx.Graph:
        """The topology as an undirected graph that the controller and agents reuse.

        Nodes carry ``role`` (server/leaf/spine/superspine) and the plan's record
        (``info``); every edge carries ``ports`` ({node: port number}) and ``mbps``.
        networkx is imported here, not with the module: every agent and switch process
        imports the plan, and few of them want its graph (networkx is ~0.15 s of a
        process's start-up).
        """
        import networkx as nx

        g = nx.Graph(name=self.spec.name)
        for server in self.servers:
            g.add_node(server.name, role="server", info=server)
        for sw in self.switches:
            g.add_node(sw.name, role=sw.role, info=sw)
        for link in self.links:
            g.add_edge(link.a, link.b, ports={link.a: link.a_port, link.b: link.b_port},
                       mbps=link.mbps)
        return g
