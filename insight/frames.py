"""Decoding the frames of the fabric: Ethernet / IPv4 / UDP / RoCEv2 BTH, by offsets.

The fields the inspection needs, read with struct from the bytes at the offsets of the
frame layout (`topo.headers`: p4src/astral.p4's headers, tccl.roce's frames). A frame
that is not IPv4 (ARP, IPv6) decodes to None: it still counts for link load, but
belongs to no flow.
"""

from __future__ import annotations

import socket
from typing import NamedTuple

from topo.headers import (ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE, BTH, ETHERNET, ETHERTYPE_IPV4, IPV4, PACKET_IN,
                          PROTO_UDP, ROCE_UDP_PORT, UDP)

# BTH opcodes that carry no payload of the message: RC ACKNOWLEDGE and ATOMIC ACKNOWLEDGE.
ACK_OPCODES = frozenset({ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE})
PSN_MODULUS = BTH.mask("psn") + 1


class Packet(NamedTuple):
    """One IPv4 frame as the inspection sees it (``opcode`` -1: not RoCEv2)."""

    src: str
    dst: str
    proto: int
    sport: int
    dport: int
    ecn: int
    length: int
    opcode: int = -1
    dqpn: int = -1
    psn: int = -1


_ETH_LEN = ETHERNET.length
_ETHERTYPE, _IPV4_TYPE = ETHERNET.span("etherType"), ETHERTYPE_IPV4.to_bytes(2, "big")
_IPV4 = IPV4.struct(("version", "ihl"), ("dscp", "ecn"), "protocol", "srcAddr", "dstAddr",
                    raw={"srcAddr", "dstAddr"})
_VERSION_SHIFT, _IHL_MASK, _ECN_MASK = IPV4.shift("version"), IPV4.mask("ihl"), IPV4.mask("ecn")
_PORTS = UDP.struct("srcPort", "dstPort")
_BTH = BTH.struct("opcode", ("fecn", "destQP"), ("ackRequest", "psn"))
_DQPN_MASK, _PSN_MASK = BTH.mask("destQP"), BTH.mask("psn")
_PACKET_IN = PACKET_IN.struct("ingress_port", "egress_port", "qdepth", "switch_id")
# Dotted-quad strings by their 4 bytes: a fabric has few addresses and millions of frames.
_ADDRESSES: dict[bytes, str] = {}


def _address(raw: bytes) -> str:
    text = _ADDRESSES.get(raw)
    if text is None:
        text = _ADDRESSES[raw] = socket.inet_ntoa(raw)
    return text


def decode(frame: bytes) -> Packet | None:
    """The IPv4 fields (and BTH fields of UDP port 4791) of ``frame``; None if the
    frame is not IPv4 or too short to hold what its headers announce."""
    if len(frame) < _ETH_LEN + IPV4.length or frame[_ETHERTYPE] != _IPV4_TYPE:
        return None
    vihl, tos, proto, src, dst = _IPV4.unpack_from(frame, _ETH_LEN)
    ihl = (vihl & _IHL_MASK) * 4
    if vihl >> _VERSION_SHIFT != 4 or ihl < IPV4.length:
        return None
    l4 = _ETH_LEN + ihl
    sport = dport = 0
    if proto == PROTO_UDP and len(frame) >= l4 + UDP.length:
        sport, dport = _PORTS.unpack_from(frame, l4)
        if dport == ROCE_UDP_PORT and len(frame) >= l4 + UDP.length + BTH.length:
            opcode, dqpn, psn = _BTH.unpack_from(frame, l4 + UDP.length)
            return Packet(_address(src), _address(dst), proto, sport, dport, tos & _ECN_MASK, len(frame),
                          opcode, dqpn & _DQPN_MASK, psn & _PSN_MASK)
    return Packet(_address(src), _address(dst), proto, sport, dport, tos & _ECN_MASK, len(frame))


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
