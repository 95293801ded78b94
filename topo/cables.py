"""A one-machine fabric's cables: veth pairs laid and cut in batches.

Mininet lays each cable with an ``ip link add`` through a node's shell (~4 ms) and
brings each end up with an ``ifconfig`` of its own (~2.5 ms): 0.3 s of the default
fabric's start for 32 cables. And it cuts each with an ``ip link del``, which the kernel
makes wait an RCU grace period (~17 ms). Here a `Cable` only records its veth pair;
`CableNet` lays every node's pairs with one ``ip -batch`` once the topology is built,
and the fabric brings the ends up together with their MTU (`topo.net`). `cut_cables`
ends the hosts' namespaces (the kernel dismantles them in one batch) and deletes the
cables between switches as one device group: one grace period for all of them.
Cluster mode lays its cables with Mininet's own classes (topo/cluster.py).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from mininet.link import Link
from mininet.net import Mininet

from topo.ipbatch import first_refusal, ip_batch

# How long the kernel may take to dismantle the hosts' namespaces once their shells end.
NAMESPACE_GONE_S = 2.0

# The device group the cables between switches join before their one deletion: a
# number of this process's own (any non-zero u32; 0 is every device's default group).
CUT_GROUP = 0x40000000 | (os.getpid() & 0x3FFFFFFF)


class CableError(RuntimeError):
    """The kernel refused to lay a cable; the message names the node and the command."""


class Cable(Link):
    """A Mininet link whose veth pair its network lays later (`CableNet.lay_cables`),
    and whose interfaces Mininet leaves down: the fabric sets each end's MTU and brings
    it up in the same batch."""

    # Node -> the ``ip`` lines (run in its namespace) of the cables it lays, not laid yet.
    unlaid: dict[Any, list[str]] = {}

    def __init__(self, node1: Any, node2: Any, **params: Any) -> None:
        params.setdefault("up", None)    # Intf.config: no `ifconfig up` per interface
        super().__init__(node1, node2, **params)

    @classmethod
    def makeIntfPair(cls, intfname1: str, intfname2: str, addr1: str | None = None,
                     addr2: str | None = None, node1: Any = None, node2: Any = None,
                     deleteIntfs: bool = True) -> None:
        """Mininet's hook that makes the veth pair: recorded for node1's batch (the
        pair made in node1's namespace, its peer moved into node2's, as Mininet's)."""
        assert node1 is not None and node2 is not None, "a Cable is laid between two nodes (fast=True)"
        one = f"name {intfname1}" + (f" address {addr1}" if addr1 else "")
        two = f"name {intfname2}" + (f" address {addr2}" if addr2 else "")
        cls.unlaid.setdefault(node1, []).append(f"link add {one} type veth peer {two} netns {node2.pid}")


class CableNet(Mininet):
    """Mininet with `Cable` links, laid in one ``ip -batch`` per node after the build."""

    def __init__(self, **params: Any) -> None:
        super().__init__(link=Cable, **params)

    def buildFromTopo(self, topo: Any = None) -> None:
        try:
            super().buildFromTopo(topo)
            self.lay_cables()
        finally:
            for node in self.hosts + self.switches:
                Cable.unlaid.pop(node, None)

    def lay_cables(self) -> None:
        """Make every recorded veth pair, a node's in one ``ip -batch`` in its shell."""
        for node in self.hosts + self.switches:
            refused = first_refusal(node, ip_batch(Cable.unlaid.pop(node, [])))
            if refused is not None:
                raise CableError(f"laying {node.name}'s cables failed: {refused[0]}\nin: {refused[1]}")


def cut_cables(net: Mininet) -> None:
    """Remove every cable of a one-machine network before Mininet's stop, faster than it
    does. Ending the hosts' shells first ends their namespaces, which the kernel
    dismantles in one batch with every veth in them and those veths' peers (the leaves'
    host ports): 7 ms for 16. The cables between switches, both ends in this namespace,
    then join `CUT_GROUP` and go in one deletion (one ``ip -batch``): 30 ms for 16
    instead of 270 ms one by one. Mininet's stop then finds no cable left and stops the
    switches and hosts as before."""
    for host in net.hosts:
        host.terminate()
    # A host's namespace lives while any process is still in it (an agent being
    # stopped): its cables then go below, from this namespace's end.
    here = {link: next((i.name for i in (link.intf1, link.intf2) if not i.node.inNamespace), None)
            for link in net.links}
    to_hosts = [name for link, name in here.items() if name and (link.intf1.node.inNamespace
                                                                 or link.intf2.node.inNamespace)]
    deadline = time.monotonic() + NAMESPACE_GONE_S
    while any(Path("/sys/class/net", name).exists() for name in to_hosts) and time.monotonic() < deadline:
        time.sleep(0.005)
    names = [name for name in here.values() if name and Path("/sys/class/net", name).exists()]
    if names:
        lines = [f"link set dev {n} group {CUT_GROUP}\n" for n in names] + [f"link del group {CUT_GROUP}\n"]
        subprocess.run(["ip", "-force", "-batch", "-"], input="".join(lines),
                       text=True, capture_output=True, check=False)
    for link in net.links:
        for intf in (link.intf1, link.intf2):
            intf.node.delIntf(intf)
    net.links.clear()
