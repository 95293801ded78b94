"""What the inspection reads in frames beyond their flow fields: the CPU port's
PacketIn header, RoCE acknowledgements and PSN order.

A frame's IPv4/UDP/BTH fields come from the fabric's one decoder (`topo.frames.decode`);
a frame it decodes to None (ARP, IPv6, malformed) still counts for link load, but
belongs to no flow.
"""

from __future__ import annotations

from topo.headers import ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE, BTH, PACKET_IN

# BTH opcodes that carry no payload of the message: RC ACKNOWLEDGE and ATOMIC ACKNOWLEDGE.
ACK_OPCODES = frozenset({ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE})
PSN_MODULUS = BTH.mask("psn") + 1
_PACKET_IN = PACKET_IN.struct("ingress_port", "egress_port", "qdepth", "switch_id")


def decode_packet_in(data: bytes) -> tuple[int, int, int, int, bytes] | None:
    """(switch id, ingress port, egress port, queue depth, frame) of a PacketIn as the
    CPU port's capture holds it; None if too short."""
    if len(data) < PACKET_IN.length:
        return None
    ingress, egress, qdepth, switch_id = _PACKET_IN.unpack_from(data)
    return switch_id, ingress, egress, qdepth, data[PACKET_IN.length:]


def psn_after(a: int, b: int) -> bool:
    """Whether PSN ``a`` comes after ``b`` in 24-bit serial arithmetic (RFC 1982 style:
    within half the space ahead)."""
    return 0 < (a - b) % PSN_MODULUS < PSN_MODULUS // 2
