"""Which machine runs which node of a fabric in Mininet's cluster mode (spec ``cluster``).

Whole blocks go to a server: a block's servers and its rail leaves share a machine, so
every NIC-leaf cable stays a veth pair inside one machine and only leaf-spine cables
can cross machines (as in a real AI cluster, where a block is wired inside its rows and
the spines are reached over the aggregation layer). Blocks are dealt in contiguous,
evenly sized runs -- `mininet.examples.cluster.SwitchBinPlacer.bin`'s way -- and spine k
goes to server ``k mod servers`` (super-spines continue the count), so every server
carries its share of spines.

Pure functions of the spec: nothing here starts a process. The plan
(`topo.addressing.AddressPlan.node_servers`, ``crossing_links``) applies them to its
nodes and cables.
"""

from __future__ import annotations

from topo.spec import FabricSpec

# Mininet's name for the machine that runs Mininet itself.
LOCALHOST = "localhost"
# Where a switch on that machine serves P4Runtime.
LOOPBACK = "127.0.0.1"


def servers_of(spec: FabricSpec) -> tuple[str, ...]:
    """The machines of the fabric, in spec order (just this one without ``cluster``)."""
    return spec.cluster.servers if spec.cluster is not None else (LOCALHOST,)


def block_server(spec: FabricSpec, block: int) -> str:
    """The machine of ``block``: contiguous runs, sizes differing by at most one."""
    servers = servers_of(spec)
    return servers[block * len(servers) // spec.blocks]


def spine_server(spec: FabricSpec, spine: int) -> str:
    """The machine of spine number ``spine``: round robin over the servers."""
    servers = servers_of(spec)
    return servers[spine % len(servers)]


def switch_server(spec: FabricSpec, role: str, block: int | None = None, pod: int | None = None,
                  spine: int | None = None, superspine: int | None = None) -> str:
    """The machine of a switch (`topo.addressing.SwitchInfo`'s fields): a leaf's block's;
    spines and then super-spines round robin in one count (spine k of pod p is number
    ``p*spines + k``; super-spine j of plane k comes after every spine), so that a
    three-tier fabric spreads both tiers over the servers."""
    if role == "leaf":
        return block_server(spec, block)
    if role == "spine":
        return spine_server(spec, (pod or 0) * spec.spines + spine)
    return spine_server(spec, spec.spine_switches + spine * spec.super_spines + superspine)


def grpc_host(server: str) -> str:
    """Where the P4Runtime server of a switch on ``server`` listens and is reached."""
    return LOOPBACK if server == LOCALHOST else server
