"""Decoding the frames of the fabric: Ethernet / IPv4 / UDP / RoCEv2 BTH, by offsets.

The fields the inspection needs, read with struct from the bytes (the layout of
p4src/astral.p4's headers and tccl.roce's frames). A frame that is not IPv4 (ARP,
IPv6) decodes to None: it still counts for link load, but belongs to no flow.
"""

from __future__ import annotations

import socket
import struct
from typing import NamedTuple

ETHERTYPE_IPV4 = 0x0800
PROTO_UDP = 17
ROCE_UDP_PORT = 4791
ETH_LEN = 14
BTH_LEN = 12
# BTH opcodes that are not data (IBA vol. 1 table 38): RC ACKNOWLEDGE and ATOMIC
# ACKNOWLEDGE carry no payload of the message; the RoCEv2 CNP (annex A17) asks the
# sender to slow down.
ACK_OPCODES = frozenset({0x11, 0x12})
CNP_OPCODE = 0x81
ECN_CE = 3
PSN_MODULUS = 1 << 24
# The packet_in header astral.p4 puts before a sampled frame on the CPU port:
# ingress_port 16, egress_port 16, qdepth 32, switch_id 32 bits.
PACKET_IN = struct.Struct("!HHII")


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


_IPV4 = struct.Struct("!BB7xB2x4s4s")      # version/IHL, TOS, protocol, src, dst
_PORTS = struct.Struct("!HH")
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
    if len(frame) < ETH_LEN + 20 or frame[12:14] != b"\x08\x00":
        return None
    vihl, tos, proto, src, dst = _IPV4.unpack_from(frame, ETH_LEN)
    ihl = (vihl & 0x0F) * 4
    if vihl >> 4 != 4 or ihl < 20:
        return None
    l4 = ETH_LEN + ihl
    sport = dport = 0
    if proto == PROTO_UDP and len(frame) >= l4 + 8:
        sport, dport = _PORTS.unpack_from(frame, l4)
        if dport == ROCE_UDP_PORT and len(frame) >= l4 + 8 + BTH_LEN:
            bth = l4 + 8
            dqpn = int.from_bytes(frame[bth + 5:bth + 8], "big")
            psn = int.from_bytes(frame[bth + 9:bth + 12], "big")
            return Packet(_address(src), _address(dst), proto, sport, dport, tos & 3, len(frame),
                          frame[bth], dqpn, psn)
    return Packet(_address(src), _address(dst), proto, sport, dport, tos & 3, len(frame))


def decode_packet_in(data: bytes) -> tuple[int, int, int, int, bytes] | None:
    """(switch id, ingress port, egress port, queue depth, frame) of a PacketIn as the
    CPU port's capture holds it; None if too short."""
    if len(data) < PACKET_IN.size:
        return None
    ingress, egress, qdepth, switch_id = PACKET_IN.unpack_from(data)
    return switch_id, ingress, egress, qdepth, data[PACKET_IN.size:]


def psn_after(a: int, b: int) -> bool:
    """Whether PSN ``a`` comes after ``b`` in 24-bit serial arithmetic (RFC 1982 style:
    within half the space ahead)."""
    return 0 < (a - b) % PSN_MODULUS < PSN_MODULUS // 2
