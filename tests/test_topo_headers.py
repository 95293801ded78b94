"""The frame layout (topo.headers) is astral.p4's, field for field, and what it derives
-- offsets, shifts, masks, struct formats -- reads the fields Scapy writes."""

from __future__ import annotations

import re

import pytest
from scapy.contrib.roce import AETH as ScapyAETH
from scapy.contrib.roce import BTH as ScapyBTH
from scapy.layers.inet import IP, UDP as ScapyUDP
from scapy.layers.l2 import Ether

from fabric_sim import PROGRAM, compiled
from topo import headers
from topo.headers import AETH, BTH, ETHERNET, IPV4, PACKET_IN, UDP, Header


@pytest.mark.parametrize("header", [PACKET_IN, ETHERNET, IPV4, UDP, BTH], ids=lambda h: h.name)
def test_headers_are_astral_p4s(header):
    types = {t["name"]: [(f, bits) for f, bits, _signed in t["fields"]] for t in compiled("crc32")["header_types"]}
    assert list(header.fields) == types[f"{header.name}_t"]


def test_next_header_numbers_are_astral_p4s():
    consts = {name: int(value, 0) for name, value in
              re.findall(r"^const bit<\d+>\s+(\w+)\s*=\s*(\w+);", PROGRAM.read_text(), re.M)}
    assert (consts["TYPE_IPV4"], consts["PROTO_UDP"], consts["ROCE_V2_PORT"], consts["BTH_OPCODE_CNP"]) == \
        (headers.ETHERTYPE_IPV4, headers.PROTO_UDP, headers.ROCE_UDP_PORT, headers.CNP)


def test_derived_offsets_read_what_scapy_writes():
    frame = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                  / IP(src="10.0.0.1", dst="10.1.2.3", tos=(46 << 2) | 3, ttl=17)
                  / ScapyUDP(sport=51234, dport=4791)
                  / ScapyBTH(opcode=0x0A, dqpn=0xABCDEF, psn=0x123456, ackreq=1, becn=1)
                  / ScapyAETH(syndrome=0x60, msn=0x654321))
    assert (ETHERNET.length, IPV4.length, UDP.length, BTH.length, AETH.length) == (14, 20, 8, 12, 4)
    assert ETHERNET.struct("etherType").unpack_from(frame)[0] == headers.ETHERTYPE_IPV4
    ip = frame[ETHERNET.length:]
    vihl, tos, ttl, proto, src = IPV4.struct(("version", "ihl"), ("dscp", "ecn"), "ttl", "protocol", "srcAddr",
                                             raw={"srcAddr"}).unpack_from(ip)
    assert (vihl >> IPV4.shift("version"), vihl & IPV4.mask("ihl")) == (4, 5)
    assert (tos >> IPV4.shift("dscp"), tos & IPV4.mask("ecn"), ttl, proto) == (46, 3, 17, headers.PROTO_UDP)
    assert src == bytes([10, 0, 0, 1]) and ip[IPV4.span("dstAddr")] == bytes([10, 1, 2, 3])
    udp = ip[IPV4.length:]
    assert UDP.struct("srcPort", "dstPort").unpack(udp[:4]) == (51234, headers.ROCE_UDP_PORT)
    bth = udp[UDP.length:]
    opcode, fecn_qp, psn_word = BTH.struct("opcode", ("fecn", "destQP"), ("ackRequest", "psn")).unpack_from(bth)
    assert (opcode, fecn_qp & BTH.mask("destQP"), psn_word & BTH.mask("psn")) == (0x0A, 0xABCDEF, 0x123456)
    assert psn_word >> BTH.shift("ackRequest", "psn") == 1
    assert bth[BTH.offset("becn")] >> BTH.shift("becn") & BTH.mask("becn") == 1
    word = AETH.struct(("syndrome", "msn")).unpack_from(bth, BTH.length)[0]
    assert (word >> AETH.shift("syndrome", "msn"), word & AETH.mask("msn")) == (0x60, 0x654321)
    assert PACKET_IN.struct().format == "!HHIIBBH6s" and PACKET_IN.length == 22


def test_packed_headers_are_what_scapy_writes():
    """`Header.pack` (what the agents' frame templates start from) gives Scapy's bytes
    for the same field values."""
    frame = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                  / IP(src="10.0.0.1", dst="10.1.2.3", tos=(26 << 2) | 2, ttl=17, id=7, flags="DF", len=60,
                       chksum=0x1234)
                  / ScapyUDP(sport=51234, dport=4791, len=40, chksum=0)
                  / ScapyBTH(opcode=0x0A, dqpn=0xABCDEF, psn=0x123456, ackreq=1, becn=1))
    ours = (ETHERNET.pack(dstAddr=0x020000000002, srcAddr=0x020000000001, etherType=headers.ETHERTYPE_IPV4)
            + IPV4.pack(version=4, ihl=5, dscp=26, ecn=2, totalLen=60, identification=7, flags=0b010, ttl=17,
                        protocol=headers.PROTO_UDP, hdrChecksum=0x1234, srcAddr=0x0A000001, dstAddr=0x0A010203)
            + UDP.pack(srcPort=51234, dstPort=headers.ROCE_UDP_PORT, length=40)
            + BTH.pack(opcode=0x0A, partitionKey=0xFFFF, becn=1, destQP=0xABCDEF, ackRequest=1, psn=0x123456))
    assert ours == frame[:len(ours)] and len(ours) == 54
    with pytest.raises(KeyError, match="header udp has no field 'sport'"):
        UDP.pack(sport=1)
    with pytest.raises(ValueError, match="header bth: psn = 16777216 does not fit 24 bits"):
        BTH.pack(psn=1 << 24)


def test_bad_declarations_and_reads_are_named():
    with pytest.raises(ValueError, match="header odd: 12 bits"):
        Header("odd", [("a", 4), ("b", 8)])
    with pytest.raises(ValueError, match="repeated"):
        Header("twice", [("a", 8), ("a", 8)])
    with pytest.raises(KeyError, match="header udp has no field 'sport'; it has srcPort"):
        UDP.offset("sport")
    with pytest.raises(ValueError, match="header ipv4: 'ecn' shares bytes"):
        IPV4.struct("dscp", "ecn")


def test_the_one_frame_decoder_reads_flows_and_refuses_what_its_headers_do_not_hold():
    """`topo.frames.decode`, which insight's captures and GOR's samples both use: a
    RoCEv2 frame's 5-tuple, ECN and BTH fields; ports 0 for other IP protocols; None for
    what is not IPv4 or is cut inside a header it announces."""
    from scapy.layers.inet import ICMP
    from scapy.layers.l2 import ARP

    from topo.frames import decode

    roce = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.1.1", tos=3) / ScapyUDP(sport=50000, dport=4791)
                 / ScapyBTH(opcode=4, dqpn=0x123, psn=77) / (b"x" * 100))
    p = decode(roce)
    assert (p.src, p.dst, p.proto, p.sport, p.dport, p.ecn) == ("10.0.0.1", "10.0.1.1", 17, 50000, 4791, 3)
    assert (p.opcode, p.dqpn, p.psn, p.length, p.ip_length) == (4, 0x123, 77, len(roce), len(roce) - 14)
    icmp = decode(bytes(Ether() / IP(src="10.0.0.1", dst="10.0.1.1") / ICMP()))
    assert (icmp.proto, icmp.sport, icmp.dport, icmp.opcode) == (1, 0, 0, -1)
    options = bytes(Ether() / IP(ihl=15, options=b"\x01" * 40) / ScapyUDP())
    assert decode(options).sport == 53    # the ports after 40 bytes of options
    assert decode(bytes(Ether() / ARP())) is None
    assert decode(roce[:14 + 20 + 4]) is None                                  # the UDP header cut
    assert decode(roce[:14] + bytes([0x44]) + roce[15:]) is None               # IHL 4: under IPv4's minimum
    assert decode(roce[:14] + bytes([0x65]) + roce[15:]) is None               # version 6 behind IPv4's type
