"""The one decoder of the fabric's IPv4 frames: Ethernet / IPv4 / UDP / RoCEv2 BTH.

Every reader of frames on the wire uses it -- the captures insight reads, the sampled
packets GOR ranks elephants by -- so a malformed frame is judged the same everywhere.
The fields are read with struct at the offsets of the frame layout (`topo.headers`,
p4src/astral.p4's headers). A frame that is not IPv4 (ARP, IPv6), or is too short to
hold what its headers announce (IPv4 options, a UDP header), decodes to None: it belongs
to no flow.
"""

from __future__ import annotations

import socket
from typing import NamedTuple

from topo.headers import BTH, ETHERNET, ETHERTYPE_IPV4, IPV4, PROTO_UDP, ROCE_UDP_PORT, UDP


class Packet(NamedTuple):
    """One IPv4 frame's flow fields (``sport``/``dport`` 0: not UDP; ``opcode`` -1: not
    RoCEv2)."""

    src: str
    dst: str
    proto: int
    sport: int
    dport: int
    ecn: int
    length: int          # bytes of the frame as read
    ip_length: int       # the IPv4 total length: the frame on the wire is ETHERNET.length more
    opcode: int = -1
    dqpn: int = -1
    psn: int = -1


_ETH_LEN = ETHERNET.length
_ETHERTYPE, _IPV4_TYPE = ETHERNET.span("etherType"), ETHERTYPE_IPV4.to_bytes(2, "big")
_IPV4 = IPV4.struct(("version", "ihl"), ("dscp", "ecn"), "totalLen", "protocol", "srcAddr", "dstAddr",
                    raw={"srcAddr", "dstAddr"})
_VERSION_SHIFT, _IHL_MASK, _ECN_MASK = IPV4.shift("version"), IPV4.mask("ihl"), IPV4.mask("ecn")
_PORTS = UDP.struct("srcPort", "dstPort")
_BTH = BTH.struct("opcode", ("fecn", "destQP"), ("ackRequest", "psn"))
_DQPN_MASK, _PSN_MASK = BTH.mask("destQP"), BTH.mask("psn")
# Dotted-quad strings by their 4 bytes: a fabric has few addresses and millions of frames.
_ADDRESSES: dict[bytes, str] = {}


def _address(raw: bytes) -> str:
    text = _ADDRESSES.get(raw)
    if text is None:
        text = _ADDRESSES[raw] = socket.inet_ntoa(raw)
    return text


def decode(frame: bytes) -> Packet | None:
    """The IPv4 fields (UDP ports, and the BTH fields of UDP port 4791 when the frame
    holds them) of ``frame``; None if it is not IPv4 or too short for its headers."""
    if len(frame) < _ETH_LEN + IPV4.length or frame[_ETHERTYPE] != _IPV4_TYPE:
        return None
    vihl, tos, total, proto, src, dst = _IPV4.unpack_from(frame, _ETH_LEN)
    ihl = (vihl & _IHL_MASK) * 4
    # A header shorter than IPv4's minimum (a corrupted IHL) would put the ports inside
    # the IP header and invent a flow.
    if vihl >> _VERSION_SHIFT != 4 or ihl < IPV4.length:
        return None
    l4 = _ETH_LEN + ihl
    head = (_address(src), _address(dst), proto)
    if proto != PROTO_UDP:
        return Packet(*head, 0, 0, tos & _ECN_MASK, len(frame), total)
    if len(frame) < l4 + UDP.length:
        return None
    sport, dport = _PORTS.unpack_from(frame, l4)
    if dport == ROCE_UDP_PORT and len(frame) >= l4 + UDP.length + BTH.length:
        opcode, dqpn, psn = _BTH.unpack_from(frame, l4 + UDP.length)
        return Packet(*head, sport, dport, tos & _ECN_MASK, len(frame), total, opcode, dqpn & _DQPN_MASK,
                      psn & _PSN_MASK)
    return Packet(*head, sport, dport, tos & _ECN_MASK, len(frame), total)
