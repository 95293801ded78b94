"""RoCEv2 frames: built once per queue pair with Scapy, patched per packet.

A RoCEv2 packet is Ethernet / IPv4 / UDP (dport 4791) / BTH [/ RETH | AETH] / payload /
ICRC. Scapy (``scapy.contrib.roce``) declares these layers and computes the ICRC, but
building one packet with it costs ~1 ms, far below the fabric's packet rate. So a
`FrameTemplate` is built once per queue pair with Scapy, and each packet copies the
template's bytes and patches what changes per packet: the IPv4 total length and
checksum, the UDP length, the BTH opcode / ack-request bit / PSN, and the ICRC, which
is computed here with the same algorithm as Scapy's ``BTH.compute_icrc`` (tests check
both agree bit for bit):

    ICRC = CRC-32 over  8 bytes of 0xFF (the absent LRH)
                      | IPv4 header with TOS, TTL and checksum set to all ones
                      | UDP header with the checksum set to all ones
                      | BTH with the FECN/BECN/reserved byte set to all ones
                      | the rest of the packet up to the ICRC,
    stored least-significant byte first.

Masking TOS means a switch setting CE (or rewriting TTL) leaves the ICRC valid.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

ROCE_UDP_PORT = 4791
ETH_LEN, IP_LEN, UDP_LEN, BTH_LEN, ICRC_LEN = 14, 20, 8, 12, 4
HDR_LEN = ETH_LEN + IP_LEN + UDP_LEN + BTH_LEN       # 54: where the BTH payload starts
IP_OFF, UDP_OFF, BTH_OFF = ETH_LEN, ETH_LEN + IP_LEN, ETH_LEN + IP_LEN + UDP_LEN
RETH_LEN, AETH_LEN = 16, 4
CNP_PAD_LEN = 16          # a CNP carries 16 reserved bytes after the BTH (IBA A17.9.2)

# BTH opcodes (IBA vol. 1, table 38; RC = transport 0b000).
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x06, 0x07, 0x08, 0x0A
ACKNOWLEDGE = 0x11
CNP = 0x81
SEND_OPCODES = frozenset({SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY})
WRITE_OPCODES = frozenset({WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY})
FIRST_OPCODES = frozenset({SEND_FIRST, SEND_ONLY, WRITE_FIRST, WRITE_ONLY})
LAST_OPCODES = frozenset({SEND_LAST, SEND_ONLY, WRITE_LAST, WRITE_ONLY})

# AETH syndromes (IBA 9.7.5.1.4): 0b000xxxxx ACK with credit count (0x1F = "no credit
# information"), 0b011xxxxx NAK with code 0 = PSN sequence error.
AETH_ACK = 0x1F
AETH_NAK_SEQ = 0x60

# ECN codepoints (RFC 3168): RoCEv2 data is ECT(0); switches rewrite it to CE.
ECN_NOT_ECT, ECN_ECT0, ECN_CE = 0, 2, 3
# CNPs travel in DSCP 48 (CS6), the value RoCE NICs use for them by default.
CNP_DSCP = 48
PSN_MASK = 0xFFFFFF
_FF8 = b"\xff" * 8
_CRC_FF8 = zlib.crc32(_FF8)


def icrc(frame: bytes | bytearray | memoryview) -> int:
    """The ICRC of an Ethernet/IPv4/UDP/BTH frame (``frame`` without or with the ICRC
    slot: the last 4 bytes are never read)."""
    head = bytearray(frame[ETH_LEN:HDR_LEN])
    head[1] = 0xFF                                 # IPv4 TOS (DSCP + ECN)
    head[8] = 0xFF                                 # TTL
    head[10:12] = b"\xff\xff"                      # header checksum
    head[IP_LEN + 6:IP_LEN + 8] = b"\xff\xff"      # UDP checksum
    head[IP_LEN + UDP_LEN + 4] = 0xFF              # BTH FECN/BECN/reserved
    crc = zlib.crc32(head, _CRC_FF8)
    return zlib.crc32(memoryview(frame)[HDR_LEN:len(frame) - ICRC_LEN], crc)


def icrc_ok(frame: bytes | bytearray | memoryview) -> bool:
    """Whether the frame's trailing ICRC matches its contents."""
    if len(frame) < HDR_LEN + ICRC_LEN:
        return False
    return struct.unpack_from("<I", frame, len(frame) - ICRC_LEN)[0] == icrc(frame)


def _ip_checksum(header: bytes) -> int:
    total = sum(struct.unpack("!10H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@dataclass(frozen=True)
class Endpoint:
    """One side of a flow on the wire: MAC, IPv4 address."""

    mac: str
    ip: str


class FrameTemplate:
    """The frames of one direction of one queue pair.

    Built once with Scapy (so the headers are exactly what Scapy declares), then
    `frame()` produces each packet from byte patches: ~100x faster than Scapy.
    """

    def __init__(self, src: Endpoint, dst: Endpoint, sport: int, dqpn: int,
                 dscp: int = 0, ecn: int = ECN_ECT0, ttl: int = 64) -> None:
        if not 0 < sport < 65536:
            raise ValueError(f"UDP source port must be 1..65535, got {sport}")
        if not 0 <= dqpn <= PSN_MASK:
            raise ValueError(f"destination QP number must fit 24 bits, got {dqpn}")
        self.src, self.dst, self.sport, self.dqpn = src, dst, sport, dqpn
        pkt = (Ether(src=src.mac, dst=dst.mac)
               / IP(src=src.ip, dst=dst.ip, tos=(dscp << 2) | ecn, ttl=ttl, id=0, flags="DF")
               / UDP(sport=sport, dport=ROCE_UDP_PORT, chksum=0)
               / BTH(opcode=SEND_ONLY, dqpn=dqpn, psn=0))
        raw = bytes(pkt)
        self._eth = raw[:ETH_LEN]
        self._ip = bytearray(raw[IP_OFF:UDP_OFF])
        self._udp = bytearray(raw[UDP_OFF:BTH_OFF])
        self._bth_tail = raw[BTH_OFF + 1:HDR_LEN]      # BTH after the opcode byte
        # Per payload length: (Ethernet/IP/UDP bytes, CRC state after the masked IP+UDP).
        self._by_len: dict[int, tuple[bytes, int]] = {}

    def _prefix(self, bth_payload_len: int) -> tuple[bytes, int]:
        cached = self._by_len.get(bth_payload_len)
        if cached is not None:
            return cached
        udp_len = UDP_LEN + BTH_LEN + bth_payload_len + ICRC_LEN
        ip = self._ip
        struct.pack_into("!H", ip, 2, IP_LEN + udp_len)
        struct.pack_into("!H", ip, 10, 0)
        struct.pack_into("!H", ip, 10, _ip_checksum(bytes(ip)))
        struct.pack_into("!H", self._udp, 4, udp_len)
        masked = bytearray(ip) + self._udp
        masked[1], masked[8], masked[10:12] = 0xFF, 0xFF, b"\xff\xff"
        masked[IP_LEN + 6:IP_LEN + 8] = b"\xff\xff"
        entry = (self._eth + bytes(ip) + bytes(self._udp), zlib.crc32(masked, _CRC_FF8))
        if len(self._by_len) < 64:                     # a message has few distinct lengths
            self._by_len[bth_payload_len] = entry
        return entry

    def frame(self, opcode: int, psn: int, payload: bytes | memoryview = b"",
              ackreq: bool = False, ext: bytes = b"") -> bytes:
        """One frame: BTH(opcode, PSN, ack request) / ``ext`` (RETH, AETH) / payload / ICRC."""
        head, crc = self._prefix(len(ext) + len(payload))
        word = (0x80000000 if ackreq else 0) | (psn & PSN_MASK)
        bth = bytes((opcode,)) + self._bth_tail[:7] + word.to_bytes(4, "big")
        crc = zlib.crc32(bth[:4] + b"\xff" + bth[5:], crc)
        if ext:
            crc = zlib.crc32(ext, crc)
        crc = zlib.crc32(payload, crc)
        return b"".join((head, bth, ext, payload, crc.to_bytes(4, "little")))

    def ack(self, psn: int, msn: int, nak: bool = False) -> bytes:
        """An RC ACKNOWLEDGE: ACK of every PSN up to ``psn``, or a sequence-error NAK
        asking for ``psn`` again."""
        aeth = bytes((AETH_NAK_SEQ if nak else AETH_ACK,)) + (msn & PSN_MASK).to_bytes(3, "big")
        return self.frame(ACKNOWLEDGE, psn, ext=aeth)

    def cnp(self) -> bytes:
        """A Congestion Notification Packet to the flow's sender (BECN set, PSN 0)."""
        head, crc = self._prefix(CNP_PAD_LEN)
        bth = bytearray(bytes((CNP,)) + self._bth_tail[:7] + b"\x00\x00\x00\x00")
        bth[4] |= 0x40                                  # BECN
        crc = zlib.crc32(bytes(bth[:4]) + b"\xff" + bytes(bth[5:]), crc)
        crc = zlib.crc32(bytes(CNP_PAD_LEN), crc)
        return b"".join((head, bytes(bth), bytes(CNP_PAD_LEN), crc.to_bytes(4, "little")))


def reth(vaddr: int, rkey: int, length: int) -> bytes:
    """The RDMA Extended Transport Header of a WRITE_FIRST/ONLY packet."""
    return struct.pack("!QII", vaddr, rkey, length)


@dataclass(frozen=True)
class Parsed:
    """The fields of a received RoCEv2 frame the transport acts on."""

    src_ip: bytes
    dst_ip: bytes
    ecn: int
    sport: int
    opcode: int
    dqpn: int
    ackreq: bool
    psn: int
    payload_off: int       # offset of the BTH payload (after RETH/AETH if present)
    payload_end: int       # offset of the ICRC
    syndrome: int = 0      # AETH, ACKNOWLEDGE only
    msn: int = 0


def parse(frame: bytes) -> Parsed | None:
    """The RoCEv2 fields of ``frame``, or None if it is not IPv4/UDP:4791 with a BTH.

    Plain struct reads (no Scapy): this runs for every received packet.
    """
    if len(frame) < HDR_LEN + ICRC_LEN or frame[12:14] != b"\x08\x00" or frame[IP_OFF] != 0x45 \
            or frame[IP_OFF + 9] != 17 or frame[UDP_OFF + 2:UDP_OFF + 4] != b"\x12\xb7":
        return None
    end = IP_OFF + struct.unpack_from("!H", frame, IP_OFF + 2)[0] - ICRC_LEN
    if end < HDR_LEN or end + ICRC_LEN > len(frame):
        return None
    opcode = frame[BTH_OFF]
    dqpn_word, psn_word = struct.unpack_from("!II", frame, BTH_OFF + 4)
    off, syndrome, msn = HDR_LEN, 0, 0
    if opcode == ACKNOWLEDGE:
        if end < HDR_LEN + AETH_LEN:
            return None
        syndrome = frame[HDR_LEN]
        msn = int.from_bytes(frame[HDR_LEN + 1:HDR_LEN + 4], "big")
        off += AETH_LEN
    elif opcode in (WRITE_FIRST, WRITE_ONLY):
        off += RETH_LEN
    if off > end:
        return None
    return Parsed(src_ip=frame[IP_OFF + 12:IP_OFF + 16], dst_ip=frame[IP_OFF + 16:IP_OFF + 20],
                  ecn=frame[IP_OFF + 1] & 3, sport=struct.unpack_from("!H", frame, UDP_OFF)[0],
                  opcode=opcode, dqpn=dqpn_word & PSN_MASK, ackreq=bool(psn_word >> 31),
                  psn=psn_word & PSN_MASK, payload_off=off, payload_end=end,
                  syndrome=syndrome, msn=msn)


def psn_diff(a: int, b: int) -> int:
    """``a - b`` in 24-bit PSN space, as a signed distance in -2^23..2^23-1."""
    d = (a - b) & PSN_MASK
    return d - (1 << 24) if d >= 1 << 23 else d
