"""The ECMP hash model: which uplink a leaf (and, in three tiers, a spine) picks for a
flow, computed off-switch.

p4src/astral.p4 computes, in ``ecmp_select`` (leaves) and ``spine_ecmp_select``
(spines going up to the super-spines)::

    hash(meta.ecmp_index, HashAlgorithm.<the tier's algorithm>, (bit<16>)0,
         { meta.salt, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol,
           meta.l4_src, meta.l4_dst }, size);

i.e. BMv2 serialises the field list MSB first, back to back (32+32+32+8+16+16 bits =
17 bytes), runs the algorithm over those bytes and takes ``result % size``. The L4
ports are the UDP ports, 0 for any other protocol. GOR and the TCCL agents use this
module to predict paths and to choose source ports; tests check it against the engine.

It owns the steering facts everyone shares: the source-port range (`PORT_RANGE`), the
path of a flow given its leaf's ECMP group (`uplink`, `predict_path`) and the search
for a source port that lands on a spine (`source_port_for_spine`), and which
algorithm each tier hashes with (`tier_algorithm`). GOR (`controller.paths`) and the
agents (`tccl.ports`) only add where the group comes from: the controller's routes
with failed cables, the document GOR publishes.

Why two algorithms: a per-switch salt prefixed to the input does not decorrelate
tiers. CRC is linear over GF(2), so crc(saltA || x) XOR crc(saltB || x) is one
constant for every x: a leaf's and its spine's choices would be locked together
(polarization; with two members each, every flow the leaf sends up spine k would
leave that spine by the same super-spine). Leaves hash with the spec's ``ecmp_hash``
and spines with the other CRC: two different polynomials give two different linear
maps of the 5-tuple, neither a function of the other, so over many flows the choices
are independent (tests/test_topo_threetier.py: chi-square).
"""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from topo.addressing import AddressPlan, SwitchInfo
from topo.headers import PROTO_UDP, ROCE_UDP_PORT, Header
from topo.spec import HASH_ALGORITHMS, FabricSpec

# Source ports the agents and GOR choose from: IANA's dynamic range (RFC 6335), where a
# stock RoCE stack draws its random ports too.
PORT_RANGE = (49152, 65535)
# Candidate ports a search hashes at once before it tries the rest of the range: a
# spine of 32 is hit ~64 times in it, a (spine, super-spine) of 32 x 32 about twice.
SEARCH_WINDOW = 2048
# The data plane's hash input in field-list order, (name, bits) -- also published to the
# agents (controller.publish) so that they can check they hash what the switches hash.
HASH_FIELDS = (("salt", 32), ("src_ip", 32), ("dst_ip", 32), ("proto", 8), ("sport", 16), ("dport", 16))
_HASH_INPUT = Header("ecmp_hash_input", HASH_FIELDS).struct()


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


def tier_algorithm(spec: FabricSpec, role: str) -> str:
    """The HashAlgorithm a switch of ``role`` hashes with: the spec's ``ecmp_hash`` at
    the leaves, the other CRC at the spines (the module docstring says why)."""
    if role == "leaf":
        return spec.ecmp_hash
    if role == "spine":
        (other,) = (a for a in HASH_ALGORITHMS if a != spec.ecmp_hash)
        return other
    raise ValueError(f"a {role} switch makes no ECMP choice (only leaves and spines do)")


def _crc_table(poly: int) -> np.ndarray:
    """The byte-at-a-time lookup table of a reflected CRC with polynomial ``poly``."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(poly), table >> 1).astype(np.uint32)
    return table


# Reflected CRCs as (table, initial register, final xor): the same algorithms as HASHES,
# run byte-at-a-time over a column of hash inputs at once (`ecmp_indices`).
_ARRAY_CRCS: dict[str, tuple[np.ndarray, int, int]] = {
    "crc32": (_crc_table(0xEDB88320), 0xFFFFFFFF, 0xFFFFFFFF),
    "crc16": (_crc_table(0xA001), 0, 0),
}


@dataclass(frozen=True)
class FiveTuple:
    """A flow as the ECMP hash sees it (ports 0 for non-UDP protocols)."""

    src: str
    dst: str
    proto: int = PROTO_UDP
    sport: int = 0
    dport: int = ROCE_UDP_PORT


def hash_input(salt: int, flow: FiveTuple) -> bytes:
    """The 17 bytes the data plane hashes, in field-list order."""
    sport, dport = (flow.sport, flow.dport) if flow.proto == PROTO_UDP else (0, 0)
    return _HASH_INPUT.pack(salt, int(ipaddress.IPv4Address(flow.src)),
                            int(ipaddress.IPv4Address(flow.dst)), flow.proto, sport, dport)


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


def hash_inputs(salts: np.ndarray, srcs: np.ndarray, dsts: np.ndarray, sports: np.ndarray,
                dport: int = ROCE_UDP_PORT) -> np.ndarray:
    """`hash_input` of many UDP flows at once: an (n, 17) byte array, one row per flow,
    from integer columns (addresses as 32-bit numbers), fields MSB first."""
    n = len(srcs)
    columns = (salts, srcs, dsts, np.full(n, PROTO_UDP), sports, np.full(n, dport))
    rows = []
    for value, (_, bits) in zip(columns, HASH_FIELDS):
        value = np.asarray(value, dtype=np.uint64)
        rows += [(value >> np.uint64(shift)) & np.uint64(0xFF) for shift in range(bits - 8, -8, -8)]
    return np.stack(rows, axis=1).astype(np.uint8)


def ecmp_indices(algorithm: str, salts: np.ndarray, srcs: np.ndarray, dsts: np.ndarray,
                 sports: np.ndarray, sizes: np.ndarray | int, dport: int = ROCE_UDP_PORT) -> np.ndarray:
    """`ecmp_index` of many UDP flows at once (numpy; the flow-level model's millions of
    flows): the same numbers, bit for bit, 17 table look-ups per column instead of a
    Python call per flow."""
    try:
        table, init, final = _ARRAY_CRCS[algorithm]
    except KeyError:
        raise ValueError(f"unknown hash algorithm {algorithm!r}; known: {', '.join(_ARRAY_CRCS)}") from None
    sizes = np.asarray(sizes, dtype=np.int64)
    if np.any(sizes < 1):
        raise ValueError("an ECMP group has at least one member, got size < 1")
    data = hash_inputs(salts, srcs, dsts, sports, dport)
    reg = np.full(len(data), init, dtype=np.uint32)
    for col in data.T:
        reg = table[(reg ^ col) & 0xFF] ^ (reg >> 8)
    return (((reg ^ np.uint32(final)).astype(np.int64) % sizes) & 0xFFFF).astype(np.int64)


def port_indices(algorithm: str, salt: int, flow: FiveTuple, sports: np.ndarray, size: int) -> np.ndarray:
    """`ecmp_index` of ``flow`` (UDP) with each of ``sports`` as its source port: the
    register after the fixed fields once, then the four port bytes over the column
    (a source-port search tries thousands of ports per flow)."""
    table, init, final = _ARRAY_CRCS[algorithm]
    reg = init
    for byte in hash_input(salt, FiveTuple(flow.src, flow.dst, PROTO_UDP, 0, flow.dport))[:-4]:
        reg = int(table[(reg ^ byte) & 0xFF]) ^ (reg >> 8)
    regs = np.full(len(sports), reg, dtype=np.uint32)
    sports = np.asarray(sports, dtype=np.int64)
    for byte in (sports >> 8, sports & 0xFF, flow.dport >> 8, flow.dport & 0xFF):   # MSB first
        regs = table[(regs ^ np.asarray(byte, dtype=np.uint32)) & 0xFF] ^ (regs >> 8)
    return (((regs ^ np.uint32(final)).astype(np.int64) % size) & 0xFFFF).astype(np.int64)


def ports_from(start: int) -> Iterator[int]:
    """Every port of `PORT_RANGE` once, from ``start`` up, wrapping around to the range's
    first port (searches started at different points hand out different ports)."""
    lo, hi = _search_range(start)
    span = hi - lo + 1
    return (lo + (start - lo + i) % span for i in range(span))


def _search_range(start: int) -> tuple[int, int]:
    """`PORT_RANGE`, after checking that a search may start at ``start``."""
    lo, hi = PORT_RANGE
    if not lo <= start <= hi:
        raise ValueError(f"a source-port search starts in {lo}..{hi}, got {start}")
    return lo, hi


def _group(plan: AddressPlan, members: Sequence[int] | None) -> Sequence[int]:
    """The spines of an ECMP group in member order; None: every spine (no failed cable)."""
    return range(plan.spec.spines) if members is None else members


def _choose(plan: AddressPlan, sw: SwitchInfo, flow: FiveTuple, group: Sequence[int]) -> int:
    """The member of ``group`` switch ``sw`` sends ``flow`` to."""
    return group[ecmp_index(tier_algorithm(plan.spec, sw.role), sw.salt, flow, len(group))]


def _crosses_pods(plan: AddressPlan, flow: FiveTuple) -> bool:
    return plan.nic(flow.src).leaf != plan.nic(flow.dst).leaf and \
        plan.pod_of(plan.nic(flow.src).block) != plan.pod_of(plan.nic(flow.dst).block)


def uplink(plan: AddressPlan, flow: FiveTuple, members: Sequence[int] | None = None) -> int:
    """The spine number ``flow`` leaves its source leaf by: member ``hash % len(members)``
    of the leaf's ECMP group for the destination, ``members`` being the group's spines
    in order (default: every spine of the pod, the fabric with no failed cable)."""
    return _choose(plan, plan.switch(plan.nic(flow.src).leaf), flow, _group(plan, members))


def spine_uplink(plan: AddressPlan, flow: FiveTuple, spine: int,
                 members: Sequence[int] | None = None) -> int:
    """Three tiers: the super-spine number (in plane ``spine``) that spine number
    ``spine`` of the source pod sends ``flow`` up to, member ``hash % len(members)`` of
    its ECMP group (default: every super-spine of the plane)."""
    sw = plan.spine(plan.pod_of(plan.nic(flow.src).block), spine)
    return _choose(plan, sw, flow, range(plan.spec.super_spines) if members is None else members)


def path_via(plan: AddressPlan, flow: FiveTuple, spine: int | None,
             superspine: int | None = None) -> list[str]:
    """The nodes a packet of ``flow`` visits going up spine number ``spine``: source
    server, leaf, spine, leaf, server; across pods (three tiers) source server, leaf,
    spine, super-spine number ``superspine`` of plane ``spine`` (default: the one the
    spine's hash picks), the destination pod's spine of that plane, leaf, server. With
    ``spine`` None (source and destination on one leaf) the leaf delivers it directly:
    server, leaf, server."""
    src, dst = plan.nic(flow.src), plan.nic(flow.dst)
    if spine is None:
        return [src.server, src.leaf, dst.server]
    up = plan.spine(plan.pod_of(src.block), spine).name
    if not _crosses_pods(plan, flow):
        return [src.server, src.leaf, up, dst.leaf, dst.server]
    if superspine is None:
        superspine = spine_uplink(plan, flow, spine)
    return [src.server, src.leaf, up, plan.super_spine(spine, superspine).name,
            plan.spine(plan.pod_of(dst.block), spine).name, dst.leaf, dst.server]


def predict_path(plan: AddressPlan, flow: FiveTuple, members: Sequence[int] | None = None) -> list[str]:
    """The nodes a packet of ``flow`` visits: source server, leaf, [spine, [super-spine,
    spine,] leaf,] server.

    The packet enters the fabric at the leaf of its source NIC; a destination on the
    same leaf is delivered directly, anything else goes up the spine the hash picks
    among ``members`` (see `uplink`), and a destination in another pod on up to the
    super-spine that spine's hash picks (`spine_uplink`).
    """
    if plan.nic(flow.src).leaf == plan.nic(flow.dst).leaf:
        return path_via(plan, flow, None)
    return path_via(plan, flow, uplink(plan, flow, members))


def source_port_for_spine(plan: AddressPlan, flow: FiveTuple, spine: int, start: int = PORT_RANGE[0],
                          avoid: Container[int] = frozenset(), members: Sequence[int] | None = None,
                          superspine: int | None = None, super_members: Sequence[int] | None = None) -> int:
    """The first UDP source port from ``start`` (`ports_from`: through `PORT_RANGE`,
    wrapping around) whose flow -- ``flow`` with that source port -- leaves its source
    leaf by spine number ``spine`` of the ECMP group ``members`` (see `uplink`) and,
    when ``superspine`` is given (a flow across pods), leaves that spine by super-spine
    number ``superspine`` of its group ``super_members`` (`spine_uplink`; default: every
    super-spine of the plane); ports in ``avoid`` are skipped. What GOR and
    the agents steer a flow with; raises if the group does not hold the spine or no
    port of the range lands on it."""
    group = _group(plan, members)
    if spine not in group:
        raise ValueError(f"spine {spine} is not in the ECMP group {list(group)} of {flow.src}->{flow.dst}")
    supers = range(plan.spec.super_spines) if super_members is None else super_members
    if superspine is not None and not (_crosses_pods(plan, flow) and superspine in supers):
        raise ValueError(f"{flow.src}->{flow.dst} does not cross pods by super-spine {superspine} "
                         f"(its spine's group: {list(supers)})")
    want = group.index(spine)
    src = plan.nic(flow.src)
    leaf = plan.switch(src.leaf)
    up = plan.spine(plan.pod_of(src.block), spine)
    lo, hi = _search_range(start)
    ordered = lo + (start - lo + np.arange(hi - lo + 1)) % (hi - lo + 1)   # `ports_from(start)`
    # A first window holds a match for nearly every flow; the rest only if it does not.
    for candidates in (ordered[:SEARCH_WINDOW], ordered[SEARCH_WINDOW:]):
        lands = port_indices(tier_algorithm(plan.spec, "leaf"), leaf.salt, flow, candidates, len(group)) == want
        if superspine is not None:
            lands &= port_indices(tier_algorithm(plan.spec, "spine"), up.salt, flow, candidates,
                                  len(supers)) == supers.index(superspine)
        for sport in candidates[lands].tolist():
            if sport not in avoid:
                return sport
    where = f"spine {spine}" if superspine is None else f"spine {spine}, super-spine {superspine}"
    raise ValueError(f"no UDP source port in {lo}..{hi} maps {flow.src}->{flow.dst} onto {where}")
