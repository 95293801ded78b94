"""The ECMP hash model: which uplink a leaf picks for a flow, computed off-switch.

p4src/astral.p4 computes, in ``ecmp_select``::

    hash(meta.ecmp_index, HashAlgorithm.<ecmp_hash>, (bit<16>)0,
         { meta.salt, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol,
           meta.l4_src, meta.l4_dst }, size);

i.e. BMv2 serialises the field list MSB first, back to back (32+32+32+8+16+16 bits =
17 bytes), runs the algorithm over those bytes and takes ``result % size``. The L4
ports are the UDP ports, 0 for any other protocol. GOR and the TCCL agents use this
module to predict paths and to choose source ports; tests check it against the engine.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from topo.addressing import AddressPlan

PROTO_UDP = 17


def _crc16_arc(data: bytes) -> int:
    """CRC-16/ARC (poly 0x8005 reflected = 0xA001, init 0, no final xor), bitwise:
    inputs are 17 bytes, a lookup table would not pay for itself."""
    rem = 0
    for byte in data:
        rem ^= byte
        for _ in range(8):
            rem = (rem >> 1) ^ 0xA001 if rem & 1 else rem >> 1
    return rem


# v1model's HashAlgorithm members as BMv2 computes them (calculations.cpp):
# crc32 = CRC-32 (zlib), crc16 = CRC-16/ARC.
HASHES: dict[str, Callable[[bytes], int]] = {
    "crc32": zlib.crc32,
    "crc16": _crc16_arc,
}


@dataclass(frozen=True)
class FiveTuple:
    """A flow as the ECMP hash sees it (ports 0 for non-UDP protocols)."""

    src: str
    dst: str
    proto: int = PROTO_UDP
    sport: int = 0
    dport: int = 4791


def hash_input(salt: int, flow: FiveTuple) -> bytes:
    """The 17 bytes the data plane hashes, in field-list order."""
    sport, dport = (flow.sport, flow.dport) if flow.proto == PROTO_UDP else (0, 0)
    return struct.pack("!I4s4sBHH", salt, ipaddress.IPv4Address(flow.src).packed,
                       ipaddress.IPv4Address(flow.dst).packed, flow.proto, sport, dport)


def ecmp_index(algorithm: str, salt: int, flow: FiveTuple, size: int) -> int:
    """The ECMP group member (0..size-1) the data plane picks for ``flow``."""
    if size < 1:
        raise ValueError(f"an ECMP group has at least one member, got size {size}")
    try:
        fn = HASHES[algorithm]
    except KeyError:
        raise ValueError(f"unknown hash algorithm {algorithm!r}; known: {', '.join(HASHES)}") from None
    # BMv2 truncates the hash to the output width (bit<16> ecmp_index) after the modulo.
    return (fn(hash_input(salt, flow)) % size) & 0xFFFF


def predict_path(plan: AddressPlan, flow: FiveTuple) -> list[str]:
    """The nodes a packet of ``flow`` visits: source server, leaf, [spine, leaf,] server.

    The packet enters the fabric at the leaf of its source NIC; a destination on the
    same leaf is delivered directly, anything else goes up the spine the hash picks.
    """
    src, dst = plan.nic(flow.src), plan.nic(flow.dst)
    first = plan.switch(src.leaf)
    if src.leaf == dst.leaf:
        return [src.server, first.name, dst.server]
    k = ecmp_index(plan.spec.ecmp_hash, first.salt, flow, plan.spec.spines)
    return [src.server, first.name, plan.spines[k].name, dst.leaf, dst.server]


def source_port_for_spine(plan: AddressPlan, flow: FiveTuple, spine: int,
                          start: int = 49152) -> int:
    """The first UDP source port >= ``start`` whose flow crosses spine number ``spine``
    (what GOR and the agents use to steer a flow; raises if no port in range does)."""
    src = plan.nic(flow.src)
    salt = plan.switch(src.leaf).salt
    for sport in range(start, 65536):
        candidate = FiveTuple(flow.src, flow.dst, PROTO_UDP, sport, flow.dport)
        if ecmp_index(plan.spec.ecmp_hash, salt, candidate, plan.spec.spines) == spine:
            return sport
    raise ValueError(f"no UDP source port in {start}..65535 maps {flow.src}->{flow.dst} onto spine {spine}")
