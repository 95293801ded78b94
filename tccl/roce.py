"""RoCEv2 frames: one template per queue pair, patched per packet, held to Scapy's.

A RoCEv2 packet is Ethernet / IPv4 / UDP (dport 4791) / BTH [/ RETH | AETH] / payload /
ICRC. Scapy (``scapy.contrib.roce``) declares these layers and computes the ICRC, but
building one packet with it costs ~1 ms, far below the fabric's packet rate. So a
`FrameTemplate` is made once per queue pair from the frame layout (`topo.headers`), and
each packet copies the template's bytes and patches what changes per packet: the IPv4
total length and checksum, the UDP length, the BTH opcode / ack-request bit / PSN, and
the ICRC, which is computed here with the same algorithm as Scapy's
``BTH.compute_icrc`` (tests check both agree bit for bit):

    ICRC = CRC-32 over  8 bytes of 0xFF (the absent LRH)
                      | IPv4 header with TOS, TTL and checksum set to all ones
                      | UDP header with the checksum set to all ones
                      | BTH with the FECN/BECN/reserved byte set to all ones
                      | the rest of the packet up to the ICRC,
    stored least-significant byte first.

Masking TOS means a switch setting CE (or rewriting TTL) leaves the ICRC valid.

Offsets come from the frame layout (`topo.headers`), turned at import into the
constants and slices the per-packet code uses; a RoCEv2 frame here has an IPv4 header
without options, so every header sits at a fixed offset.
"""

from __future__ import annotations

import socket
import struct
import zlib
from dataclasses import dataclass

from topo import headers
# The wire's numbers, from the frame layout; the transport names them roce.<NAME>.
from topo.headers import dscp_priority
from topo.headers import (ACKNOWLEDGE, CNP, CNP_DSCP, ECN_CE, ECN_ECT0, ECN_NOT_ECT, ETHERTYPE_IPV4,  # noqa: F401
                          ICRC_LEN, PROTO_UDP, ROCE_UDP_PORT, SEND_FIRST, SEND_LAST, SEND_MIDDLE, SEND_ONLY,
                          WRITE_FIRST, WRITE_LAST, WRITE_MIDDLE, WRITE_ONLY)

_IP, _UDP, _BTH, _AETH = headers.IPV4, headers.UDP, headers.BTH, headers.AETH
ETH_LEN, IP_LEN, UDP_LEN, BTH_LEN = headers.ETHERNET.length, _IP.length, _UDP.length, _BTH.length
HDR_LEN = ETH_LEN + IP_LEN + UDP_LEN + BTH_LEN       # 54: where the BTH payload starts
IP_OFF, UDP_OFF, BTH_OFF = ETH_LEN, ETH_LEN + IP_LEN, ETH_LEN + IP_LEN + UDP_LEN
RETH_LEN, AETH_LEN = headers.RETH.length, _AETH.length
CNP_PAD_LEN = 16          # a CNP carries 16 reserved bytes after the BTH (IBA A17.9.2)

SEND_OPCODES = frozenset({SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY})
WRITE_OPCODES = frozenset({WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY})
FIRST_OPCODES = frozenset({SEND_FIRST, SEND_ONLY, WRITE_FIRST, WRITE_ONLY})
LAST_OPCODES = frozenset({SEND_LAST, SEND_ONLY, WRITE_LAST, WRITE_ONLY})

# AETH syndromes (IBA 9.7.5.1.4): 0b000xxxxx ACK with credit count (0x1F = "no credit
# information"), 0b011xxxxx NAK with code 0 = PSN sequence error.
AETH_ACK = 0x1F
AETH_NAK_SEQ = 0x60

PSN_MASK = _BTH.mask("psn")
_FF8 = b"\xff" * 8
_CRC_FF8 = zlib.crc32(_FF8)

# Template patching, from the IPv4 header's start: the lengths and the checksum, and
# what the ICRC masks (TOS = DSCP + ECN, TTL, both checksums, BTH byte 4).
_IP_LEN_AT, _IP_CSUM_AT = _IP.offset("totalLen"), _IP.offset("hdrChecksum")
_UDP_LEN_AT = _UDP.offset("length")
_TOS, _TTL, _DSCP_SHIFT = _IP.offset("dscp"), _IP.offset("ttl"), _IP.shift("dscp")
_IP_CSUM, _UDP_CSUM = _IP.span("hdrChecksum"), _UDP.span("checksum", IP_LEN)
_IP_WORDS = struct.Struct(f"!{IP_LEN // 2}H")          # the header's 16-bit words, for its checksum
_BTH_FECN = _BTH.offset("fecn")                        # the FECN/BECN/reserved byte
_BTH_MASKED = IP_LEN + UDP_LEN + _BTH_FECN          # that byte in the IPv4 + UDP + BTH head
_BECN = 1 << _BTH.shift("becn")
_BTH_PSN = _BTH.offset("ackRequest")                   # the ack-request/PSN word
_PSN_WORD_LEN = BTH_LEN - _BTH_PSN
_ACKREQ = 1 << _BTH.shift("ackRequest", "psn")
_RETH = headers.RETH.struct()
_AETH_WORD = _AETH.struct(("syndrome", "msn"))
_SYNDROME_SHIFT, _MSN_MASK = _AETH.shift("syndrome", "msn"), _AETH.mask("msn")

# What parse() tests and reads, from the frame's start.
_ETHERTYPE, _IPV4_TYPE = headers.ETHERNET.span("etherType"), ETHERTYPE_IPV4.to_bytes(2, "big")
_VIHL = IP_OFF + _IP.offset("version")
_PLAIN_IPV4 = (4 << _IP.shift("version")) | IP_LEN // 4     # version 4, IHL 5 (no options)
_PROTOCOL = IP_OFF + _IP.offset("protocol")
_DPORT, _ROCE_PORT = _UDP.span("dstPort", UDP_OFF), ROCE_UDP_PORT.to_bytes(2, "big")
_TOTAL_LEN = _IP.struct("totalLen")
_ECN_AT, _ECN_MASK = IP_OFF + _IP.offset("ecn"), _IP.mask("ecn")
_SRC, _DST = _IP.span("srcAddr", IP_OFF), _IP.span("dstAddr", IP_OFF)
_SPORT = _UDP.struct("srcPort")
_BTH_WORDS = _BTH.struct("opcode", ("fecn", "destQP"), ("ackRequest", "psn"))
_DQPN_MASK = _BTH.mask("destQP")


def priority(frame: bytes | bytearray) -> int:
    """The priority a switch gives this frame (its DSCP's class selector): what a PFC
    PAUSE for that priority holds back."""
    return dscp_priority(frame[IP_OFF + _TOS] >> _DSCP_SHIFT)


def icrc(frame: bytes | bytearray | memoryview) -> int:
    """The ICRC of an Ethernet/IPv4/UDP/BTH frame (``frame`` without or with the ICRC
    slot: the last 4 bytes are never read)."""
    head = bytearray(frame[ETH_LEN:HDR_LEN])
    head[_TOS] = head[_TTL] = head[_BTH_MASKED] = 0xFF
    head[_IP_CSUM] = head[_UDP_CSUM] = b"\xff\xff"
    crc = zlib.crc32(head, _CRC_FF8)
    return zlib.crc32(memoryview(frame)[HDR_LEN:len(frame) - ICRC_LEN], crc)


def icrc_ok(frame: bytes | bytearray | memoryview) -> bool:
    """Whether the frame's trailing ICRC matches its contents."""
    if len(frame) < HDR_LEN + ICRC_LEN:
        return False
    return struct.unpack_from("<I", frame, len(frame) - ICRC_LEN)[0] == icrc(frame)


def _ip_checksum(header: bytes) -> int:
    total = sum(_IP_WORDS.unpack(header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@dataclass(frozen=True)
class Endpoint:
    """One side of a flow on the wire: MAC, IPv4 address."""

    mac: str
    ip: str


def _mac(mac: str) -> bytes:
    """A MAC address "aa:bb:cc:dd:ee:ff" as its six bytes."""
    try:
        raw = bytes.fromhex(mac.replace(":", ""))
    except ValueError:
        raw = b""
    if len(raw) != 6:
        raise ValueError(f"a MAC address is six hex bytes separated by colons, got {mac!r}")
    return raw


def _ipv4(ip: str) -> bytes:
    """A dotted-quad IPv4 address as its four bytes."""
    try:
        return socket.inet_aton(ip)
    except OSError:
        raise ValueError(f"not an IPv4 address: {ip!r}") from None


# The headers of every template, from the frame layout with Scapy's defaults for these
# layers (IPv4 version 4, IHL 5, DF, TTL 64; the BTH's partition key 0xFFFF); a
# template patches in its addresses, TOS, TTL, source port and QPN, and `frame()` the
# lengths and checksums. Not built with Scapy here: importing it was half of an agent's
# start-up (~0.5 s of CPU per agent, four agents per job on two cores); the tests build
# every kind of frame with Scapy and hold ours to it byte for byte.
_PROTOTYPE = (headers.ETHERNET.pack(etherType=ETHERTYPE_IPV4)
              + _IP.pack(version=4, ihl=5, flags=0b010, ttl=64, protocol=PROTO_UDP)
              + _UDP.pack(srcPort=1, dstPort=ROCE_UDP_PORT)
              + _BTH.pack(opcode=SEND_ONLY, partitionKey=0xFFFF))
_ETH_DST, _ETH_SRC = headers.ETHERNET.span("dstAddr"), headers.ETHERNET.span("srcAddr")
_SPORT_AT = _UDP.span("srcPort", UDP_OFF)
_DQPN_AT = _BTH.span("destQP", BTH_OFF)


class FrameTemplate:
    """The frames of one direction of one queue pair.

    Its headers are `_PROTOTYPE` with this QP's fields patched in (the tests hold its
    frames to Scapy's own build), then `frame()` produces each packet from byte
    patches: ~100x faster than Scapy.
    """

    def __init__(self, src: Endpoint, dst: Endpoint, sport: int, dqpn: int,
                 dscp: int = 0, ecn: int = ECN_ECT0, ttl: int = 64) -> None:
        if not 0 < sport < 65536:
            raise ValueError(f"UDP source port must be 1..65535, got {sport}")
        if not 0 <= dqpn <= PSN_MASK:
            raise ValueError(f"destination QP number must fit 24 bits, got {dqpn}")
        if not (0 <= dscp <= _IP.mask("dscp") and 0 <= ecn <= _ECN_MASK and 0 <= ttl <= _IP.mask("ttl")):
            raise ValueError(f"DSCP 0..63, ECN 0..3 and TTL 0..255, got {dscp}, {ecn}, {ttl}")
        self.src, self.dst, self.sport, self.dqpn = src, dst, sport, dqpn
        raw = bytearray(_PROTOTYPE)
        raw[_ETH_DST], raw[_ETH_SRC] = _mac(dst.mac), _mac(src.mac)
        raw[IP_OFF + _TOS] = (dscp << _DSCP_SHIFT) | ecn
        raw[IP_OFF + _TTL] = ttl
        raw[_SRC], raw[_DST] = _ipv4(src.ip), _ipv4(dst.ip)
        raw[_SPORT_AT] = sport.to_bytes(2, "big")
        raw[_DQPN_AT] = dqpn.to_bytes(3, "big")
        self._eth = raw[:ETH_LEN]
        self._ip = bytearray(raw[IP_OFF:UDP_OFF])
        self._udp = bytearray(raw[UDP_OFF:BTH_OFF])
        # The BTH between the opcode byte and the PSN word, as sent and as the ICRC
        # sees it (FECN/BECN/reserved byte masked); a CNP's with BECN set.
        self._bth_mid = raw[BTH_OFF + 1:BTH_OFF + _BTH_PSN]
        masked = bytearray(self._bth_mid)
        masked[_BTH_FECN - 1] = 0xFF
        self._bth_mid_masked = bytes(masked)
        becn = bytearray(self._bth_mid)
        becn[_BTH_FECN - 1] |= _BECN
        self._bth_mid_becn = bytes(becn)
        # Per payload length: (Ethernet/IP/UDP bytes, CRC state after the masked IP+UDP).
        self._by_len: dict[int, tuple[bytes, int]] = {}

    def _prefix(self, bth_payload_len: int) -> tuple[bytes, int]:
        cached = self._by_len.get(bth_payload_len)
        if cached is not None:
            return cached
        udp_len = UDP_LEN + BTH_LEN + bth_payload_len + ICRC_LEN
        ip = self._ip
        struct.pack_into("!H", ip, _IP_LEN_AT, IP_LEN + udp_len)
        struct.pack_into("!H", ip, _IP_CSUM_AT, 0)
        struct.pack_into("!H", ip, _IP_CSUM_AT, _ip_checksum(bytes(ip)))
        struct.pack_into("!H", self._udp, _UDP_LEN_AT, udp_len)
        masked = bytearray(ip) + self._udp
        masked[_TOS] = masked[_TTL] = 0xFF
        masked[_IP_CSUM] = masked[_UDP_CSUM] = b"\xff\xff"
        entry = (self._eth + bytes(ip) + bytes(self._udp), zlib.crc32(masked, _CRC_FF8))
        if len(self._by_len) < 64:                     # a message has few distinct lengths
            self._by_len[bth_payload_len] = entry
        return entry

    def frame(self, opcode: int, psn: int, payload: bytes | memoryview = b"",
              ackreq: bool = False, ext: bytes = b"") -> bytes:
        """One frame: BTH(opcode, PSN, ack request) / ``ext`` (RETH, AETH) / payload / ICRC."""
        head, crc = self._prefix(len(ext) + len(payload))
        op = bytes((opcode,))
        word = ((_ACKREQ if ackreq else 0) | (psn & PSN_MASK)).to_bytes(_PSN_WORD_LEN, "big")
        bth = op + self._bth_mid + word
        crc = zlib.crc32(op + self._bth_mid_masked + word, crc)
        if ext:
            crc = zlib.crc32(ext, crc)
        crc = zlib.crc32(payload, crc)
        return b"".join((head, bth, ext, payload, crc.to_bytes(4, "little")))

    def ack(self, psn: int, msn: int, nak: bool = False) -> bytes:
        """An RC ACKNOWLEDGE: ACK of every PSN up to ``psn``, or a sequence-error NAK
        asking for ``psn`` again."""
        aeth = _AETH_WORD.pack((AETH_NAK_SEQ if nak else AETH_ACK) << _SYNDROME_SHIFT | (msn & _MSN_MASK))
        return self.frame(ACKNOWLEDGE, psn, ext=aeth)

    def cnp(self) -> bytes:
        """A Congestion Notification Packet to the flow's sender (BECN set, PSN 0)."""
        head, crc = self._prefix(CNP_PAD_LEN)
        op, psn = bytes((CNP,)), bytes(_PSN_WORD_LEN)
        crc = zlib.crc32(op + self._bth_mid_masked + psn, crc)
        crc = zlib.crc32(bytes(CNP_PAD_LEN), crc)
        return b"".join((head, op, self._bth_mid_becn, psn, bytes(CNP_PAD_LEN), crc.to_bytes(4, "little")))


def reth(vaddr: int, rkey: int, length: int) -> bytes:
    """The RDMA Extended Transport Header of a WRITE_FIRST/ONLY packet."""
    return _RETH.pack(vaddr, rkey, length)


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
    if len(frame) < HDR_LEN + ICRC_LEN or frame[_ETHERTYPE] != _IPV4_TYPE or frame[_VIHL] != _PLAIN_IPV4 \
            or frame[_PROTOCOL] != PROTO_UDP or frame[_DPORT] != _ROCE_PORT:
        return None
    end = IP_OFF + _TOTAL_LEN.unpack_from(frame, IP_OFF)[0] - ICRC_LEN
    if end < HDR_LEN or end + ICRC_LEN > len(frame):
        return None
    opcode, dqpn_word, psn_word = _BTH_WORDS.unpack_from(frame, BTH_OFF)
    off, syndrome, msn = HDR_LEN, 0, 0
    if opcode == ACKNOWLEDGE:
        if end < HDR_LEN + AETH_LEN:
            return None
        aeth = _AETH_WORD.unpack_from(frame, HDR_LEN)[0]
        syndrome, msn = aeth >> _SYNDROME_SHIFT, aeth & _MSN_MASK
        off += AETH_LEN
    elif opcode in (WRITE_FIRST, WRITE_ONLY):
        off += RETH_LEN
    if off > end:
        return None
    return Parsed(src_ip=frame[_SRC], dst_ip=frame[_DST],
                  ecn=frame[_ECN_AT] & _ECN_MASK, sport=_SPORT.unpack_from(frame, UDP_OFF)[0],
                  opcode=opcode, dqpn=dqpn_word & _DQPN_MASK, ackreq=bool(psn_word & _ACKREQ),
                  psn=psn_word & PSN_MASK, payload_off=off, payload_end=end,
                  syndrome=syndrome, msn=msn)


def psn_diff(a: int, b: int) -> int:
    """``a - b`` in 24-bit PSN space, as a signed distance in -2^23..2^23-1."""
    d = (a - b) & PSN_MASK
    return d - (PSN_MASK + 1) if d > PSN_MASK >> 1 else d
