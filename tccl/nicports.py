"""A rank's NIC as the kernel sees it: two packet sockets on its interface, RoCE (IPv4)
and MAC control (PFC PAUSE), for both transports (engine.py's `NicPort` and the native
`NativeDevice`).

An agent opens every local rank's ports at once (`open_nic_ports`): the kernel waits an
RCU grace period in each receive ring's setup, and one NIC after another an agent of 4
NICs waited 4 times; `p4sim.switch.ports.open_ports` overlaps them.
"""

from __future__ import annotations

from typing import Iterable

from p4sim.switch.pause import ETHERTYPE_MAC_CONTROL
from p4sim.switch.ports import ETH_P_IPV4, InterfacePort, open_ports
from tccl.job import RankInfo

# Receive ring of a NIC's MAC-control port (PAUSE frames): 4 blocks hold 28 frames, far
# more than a switch sends between two turns of the loop (one per XOFF/XON change).
PAUSE_RING_BLOCKS = 4


def open_nic_ports(ranks: Iterable[RankInfo]) -> dict[int, tuple[InterfacePort, InterfacePort]]:
    """Each rank's (RoCE port, MAC-control port) on its interface, every one opened at
    once (`PortError` naming the rank if one cannot be; then none stays open)."""
    ranks = list(ranks)
    wanted = []
    for info in ranks:
        wanted += [{"number": info.rank, "iface": info.iface, "protocol": ETH_P_IPV4, "promisc": False,
                    "name": f"rank {info.rank}"},
                   {"number": info.rank, "iface": info.iface, "protocol": ETHERTYPE_MAC_CONTROL,
                    "promisc": False, "name": f"rank {info.rank} MAC control", "ring_blocks": PAUSE_RING_BLOCKS}]
    ports = open_ports(wanted)
    return {info.rank: (ports[2 * k], ports[2 * k + 1]) for k, info in enumerate(ranks)}
