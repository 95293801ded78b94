"""The fabric's frame layout, declared once: Ethernet, IPv4, UDP, the RoCEv2 BTH and its
extension headers, and the ``packet_in`` header a switch puts before a sampled frame,
with the numbers that say which header comes next.

A header is declared the way Scapy's ``fields_desc`` declares a layer: its fields
(name, bits) in wire order, most significant bit first -- here exactly the header
types of p4src/astral.p4 (tests compare them with the compiled program field by
field). Everything a decoder needs is derived from that: byte offsets, slices, masks,
shifts and struct formats. The decoders -- `controller.elephants` (sampled PacketIns),
`tccl.roce` (every packet an agent sends or receives), `insight.frames` (captures) --
derive their constants once at import, so per-packet code stays plain slicing.

It lives in topo/ because the fabric owns the data plane's program and so its wire
format, and because topo is below controller, tccl and insight, which all import it;
the module itself imports only the standard library, so it can create no cycle.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Sequence

# Which header follows: astral.p4's TYPE_IPV4, PROTO_UDP and ROCE_V2_PORT (IEEE
# EtherType, IANA protocol number, IANA's UDP port for RoCEv2).
ETHERTYPE_IPV4 = 0x0800
PROTO_UDP = 17
ROCE_UDP_PORT = 4791

# ECN codepoints (RFC 3168): RoCEv2 data is ECT(0); switches rewrite it to CE.
ECN_NOT_ECT, ECN_ECT0, ECN_CE = 0, 2, 3

# QoS (astral.p4 trusts DSCP): a packet's priority -- its egress queue and its PFC
# class -- is the DSCP's class selector, the top three bits. RoCE NICs' defaults put
# data and ACKs in DSCP 26 (AF31, priority 3: the lossless one) and CNPs in DSCP 48
# (CS6, priority 6: above the data they throttle).
ROCE_PRIORITY, CNP_DSCP = 3, 48
DSCP_PRIORITY_SHIFT = 3


def dscp_priority(dscp: int) -> int:
    """The priority astral.p4 gives a packet of this DSCP."""
    return dscp >> DSCP_PRIORITY_SHIFT


def priority_dscp(priority: int) -> int:
    """The DSCP RoCE traffic of ``priority`` is sent with: AF<priority>1 (26 for 3, the
    NICs' default); its class selector is ``priority``."""
    return priority << DSCP_PRIORITY_SHIFT | 2


# BTH opcodes (IBA vol. 1, table 38; RC = transport 0b000) and the RoCEv2 CNP (annex
# A17, astral.p4's BTH_OPCODE_CNP).
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x06, 0x07, 0x08, 0x0A
ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE = 0x11, 0x12
CNP = 0x81

# struct codes of the unsigned integers struct reads, by byte width.
_INT_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}


class Header:
    """One header: ``fields`` as (name, bits) in wire order, most significant bit first.

    A field is located by the bytes that hold it, from `offset` up to `end`; a field
    narrower than those bytes is ``(value >> shift(name)) & mask(name)`` of them.
    """

    def __init__(self, name: str, fields: Sequence[tuple[str, int]]) -> None:
        self.name = name
        self.fields = tuple(fields)
        self._at: dict[str, tuple[int, int]] = {}
        bit = 0
        for field, bits in self.fields:
            if field in self._at or bits < 1:
                raise ValueError(f"header {name}: field {field!r} is repeated or has no bits")
            self._at[field] = (bit, bits)
            bit += bits
        if bit % 8:
            raise ValueError(f"header {name}: {bit} bits are not a whole number of bytes")
        self.length = bit // 8

    def _field(self, field: str) -> tuple[int, int]:
        try:
            return self._at[field]
        except KeyError:
            raise KeyError(f"header {self.name} has no field {field!r}; "
                           f"it has {', '.join(f for f, _ in self.fields)}") from None

    def offset(self, field: str) -> int:
        """The first byte holding ``field``, from the header's start."""
        return self._field(field)[0] // 8

    def end(self, field: str) -> int:
        """One past the last byte holding ``field``."""
        first, bits = self._field(field)
        return -(-(first + bits) // 8)

    def span(self, field: str, at: int = 0) -> slice:
        """The bytes holding ``field`` in a frame where the header starts at byte ``at``."""
        return slice(at + self.offset(field), at + self.end(field))

    def mask(self, field: str) -> int:
        """All ones, as wide as ``field``."""
        return (1 << self._field(field)[1]) - 1

    def shift(self, field: str, last: str | None = None) -> int:
        """How far ``field`` sits above the low end of the bytes read up to field
        ``last``'s (default: its own) last byte."""
        first, bits = self._field(field)
        return 8 * self.end(last or field) - first - bits

    def pack(self, **values: int) -> bytes:
        """The header's bytes with the fields named set to ``values`` and the others 0:
        how a frame's constant headers are built without a packet library."""
        unknown = set(values) - set(self._at)
        if unknown:
            self._field(min(unknown))                # raises, naming the field
        word = 0
        for field, bits in self.fields:
            value = values.get(field, 0)
            if not 0 <= value < 1 << bits:
                raise ValueError(f"header {self.name}: {field} = {value} does not fit {bits} bits")
            word = word << bits | value
        return word.to_bytes(self.length, "big")

    def struct(self, *items: str | tuple[str, str], raw: Collection[str] = ()) -> struct.Struct:
        """A big-endian struct reading ``items`` from the header's start (all fields if
        none are named). An item is a field, or a (first, last) pair of fields read
        together as one value; it reads the bytes holding it, as an unsigned integer if
        they are 1, 2, 4 or 8, else -- or if the item's field is in ``raw`` -- as bytes.
        Items are in wire order and share no byte; the bytes between them are skipped."""
        fmt, at = "!", 0
        for item in items or [f for f, _ in self.fields]:
            first, last = (item, item) if isinstance(item, str) else item
            lo, hi = self.offset(first), self.end(last)
            if lo < at or hi <= lo:
                raise ValueError(f"header {self.name}: {item!r} shares bytes with the item before it, "
                                 f"or its last field comes before its first")
            size = hi - lo
            code = f"{size}s" if item in raw or size not in _INT_CODES else _INT_CODES[size]
            fmt += (f"{lo - at}x" if lo > at else "") + code
            at = hi
        return struct.Struct(fmt)


ETHERNET = Header("ethernet", [("dstAddr", 48), ("srcAddr", 48), ("etherType", 16)])

# Without options (IHL 5): what the agents send; decoders of captured frames read IHL.
IPV4 = Header("ipv4", [
    ("version", 4), ("ihl", 4), ("dscp", 6), ("ecn", 2), ("totalLen", 16),
    ("identification", 16), ("flags", 3), ("fragOffset", 13), ("ttl", 8), ("protocol", 8),
    ("hdrChecksum", 16), ("srcAddr", 32), ("dstAddr", 32)])

UDP = Header("udp", [("srcPort", 16), ("dstPort", 16), ("length", 16), ("checksum", 16)])

# InfiniBand Base Transport Header as carried by RoCEv2 (IBA 9.2).
BTH = Header("bth", [
    ("opcode", 8), ("solicitedEvent", 1), ("migReq", 1), ("padCount", 2), ("transportVersion", 4),
    ("partitionKey", 16), ("fecn", 1), ("becn", 1), ("reserved1", 6), ("destQP", 24),
    ("ackRequest", 1), ("reserved2", 7), ("psn", 24)])

# The extension headers after a BTH (IBA 9.3): RDMA (WRITE FIRST/ONLY) and ACK.
RETH = Header("reth", [("virtualAddress", 64), ("rKey", 32), ("dmaLength", 32)])
AETH = Header("aeth", [("syndrome", 8), ("msn", 24)])

# The invariant CRC trailing every RoCEv2 packet (IBA A17.4.2), and what a RoCE data
# frame (SEND/WRITE middle) carries besides its payload: what a link's rate is shared
# between, so the payload's share of a link is mtu / (mtu + ROCE_DATA_OVERHEAD).
ICRC_LEN = 4
ROCE_DATA_OVERHEAD = ETHERNET.length + IPV4.length + UDP.length + BTH.length + ICRC_LEN

# What astral.p4 prepends to a frame it sends to the CPU port (its
# @controller_header("packet_in")): a 1-in-N sample (``sampled`` 1), an ECN alarm of the
# egress port (``alarm_level`` 1..3, the level's mark count, the emulated microsecond of
# the first of those marks), or both. The controller gets the fields as PacketIn
# metadata by these names, a CPU port's capture holds the header itself.
PACKET_IN = Header("packet_in", [("ingress_port", 16), ("egress_port", 16), ("qdepth", 32),
                                 ("switch_id", 32), ("sampled", 8), ("alarm_level", 8),
                                 ("alarm_marks", 16), ("first_mark", 48)])
