"""RoCEv2 frames from tccl.roce's patched templates equal Scapy's, ICRC included."""

from __future__ import annotations

import random

import pytest
from scapy.contrib.roce import AETH, BTH, CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from tccl import roce
from topo.headers import CNP_DSCP, priority_dscp

SRC = roce.Endpoint("02:00:0a:00:00:01", "10.0.0.1")
DST = roce.Endpoint("02:00:0a:00:00:02", "10.0.1.2")


def scapy_frame(opcode: int, psn: int, payload: bytes, ackreq: bool, sport: int = 50000,
                dqpn: int = 0x10203, ext: bytes = b"", becn: int = 0, tos: int = 2) -> bytes:
    pkt = (Ether(src=SRC.mac, dst=DST.mac)
           / IP(src=SRC.ip, dst=DST.ip, tos=tos, ttl=64, id=0, flags="DF")
           / UDP(sport=sport, dport=4791, chksum=0)
           / BTH(opcode=opcode, dqpn=dqpn, psn=psn, ackreq=int(ackreq), becn=becn)
           / Raw(ext + payload))
    return bytes(pkt)


@pytest.mark.parametrize("opcode,psn,size,ackreq", [
    (roce.SEND_FIRST, 0, 1024, False),
    (roce.SEND_MIDDLE, 0xFFFFFF, 1024, True),
    (roce.SEND_LAST, 12345, 17, True),
    (roce.SEND_ONLY, 7, 0, True),
    (roce.WRITE_MIDDLE, 0x800000, 333, False),
])
def test_data_frame_equals_scapy(opcode, psn, size, ackreq):
    payload = bytes((i * 7 + 3) & 0xFF for i in range(size))
    tpl = roce.FrameTemplate(SRC, DST, sport=50000, dqpn=0x10203)
    ours = tpl.frame(opcode, psn, payload, ackreq=ackreq)
    assert ours == scapy_frame(opcode, psn, payload, ackreq)
    assert roce.icrc_ok(ours)


def test_template_reused_across_lengths():
    tpl = roce.FrameTemplate(SRC, DST, sport=61000, dqpn=5)
    for size in (1024, 10, 1024, 500, 10):
        payload = bytes(size)
        assert tpl.frame(roce.SEND_MIDDLE, size, payload) == \
            scapy_frame(roce.SEND_MIDDLE, size, payload, False, sport=61000, dqpn=5)


def test_write_first_carries_reth():
    reth = roce.reth(0x1000, 0x77, 4096)
    tpl = roce.FrameTemplate(SRC, DST, sport=50000, dqpn=0x10203)
    ours = tpl.frame(roce.WRITE_FIRST, 3, b"x" * 100, ext=reth)
    assert ours == scapy_frame(roce.WRITE_FIRST, 3, b"x" * 100, False, ext=reth)
    p = roce.parse(ours)
    assert p.payload_off == roce.HDR_LEN + roce.RETH_LEN
    assert ours[p.payload_off:p.payload_end] == b"x" * 100


def test_fields_decode_in_scapy():
    tpl = roce.FrameTemplate(SRC, DST, sport=49999, dqpn=0xABCDE)
    pkt = Ether(tpl.frame(roce.SEND_LAST, 42, b"hello", ackreq=True))
    assert pkt[IP].tos & 3 == roce.ECN_ECT0
    assert pkt[UDP].sport == 49999 and pkt[UDP].dport == 4791
    bth = pkt[BTH]
    assert (bth.opcode, bth.dqpn, bth.psn, bth.ackreq) == (roce.SEND_LAST, 0xABCDE, 42, 1)
    # Scapy recomputes the ICRC of the decoded packet and gets ours.
    assert bytes(bth.payload)[:5] == b"hello"


def test_ack_nak_and_cnp_decode():
    tpl = roce.FrameTemplate(DST, SRC, sport=50001, dqpn=0x42, ecn=roce.ECN_NOT_ECT)
    ack = Ether(tpl.ack(100, 3))
    assert ack[BTH].opcode == roce.ACKNOWLEDGE and ack[BTH].psn == 100
    assert (ack[AETH].syndrome, ack[AETH].msn) == (roce.AETH_ACK, 3)
    nak = roce.parse(tpl.ack(7, 1, nak=True))
    assert (nak.syndrome, nak.psn, nak.msn) == (roce.AETH_NAK_SEQ, 7, 1)
    tpl_cnp = roce.FrameTemplate(DST, SRC, sport=50001, dqpn=0x42, dscp=roce.CNP_DSCP,
                                 ecn=roce.ECN_NOT_ECT)
    raw = tpl_cnp.cnp()
    assert roce.icrc_ok(raw)
    cnp = Ether(raw)
    assert cnp[BTH].opcode == roce.CNP and cnp[BTH].becn == 1 and cnp[BTH].dqpn == 0x42
    assert CNPPadding in cnp
    expected = (Ether(src=DST.mac, dst=SRC.mac)
                / IP(src=DST.ip, dst=SRC.ip, tos=roce.CNP_DSCP << 2, ttl=64, id=0, flags="DF")
                / UDP(sport=50001, dport=4791, chksum=0)
                / BTH(opcode=roce.CNP, dqpn=0x42, becn=1) / CNPPadding())
    assert raw == bytes(expected)


def test_ce_mark_and_ttl_keep_icrc_valid_but_payload_change_breaks_it():
    tpl = roce.FrameTemplate(SRC, DST, sport=50000, dqpn=9)
    frame = bytearray(tpl.frame(roce.SEND_ONLY, 1, b"payload", ackreq=True))
    frame[roce.IP_OFF + 1] |= roce.ECN_CE          # a switch marks CE ...
    frame[roce.IP_OFF + 8] -= 1                    # ... and decrements TTL
    assert roce.icrc_ok(frame)
    assert roce.parse(bytes(frame)).ecn == roce.ECN_CE
    frame[roce.HDR_LEN] ^= 1
    assert not roce.icrc_ok(frame)


def test_parse_rejects_other_traffic():
    udp = bytes(Ether() / IP(src="1.1.1.1", dst="2.2.2.2") / UDP(sport=1, dport=53) / Raw(bytes(40)))
    assert roce.parse(udp) is None
    assert roce.parse(b"\x00" * 10) is None


def test_bad_template_arguments():
    with pytest.raises(ValueError, match="source port"):
        roce.FrameTemplate(SRC, DST, sport=0, dqpn=1)
    with pytest.raises(ValueError, match="24 bits"):
        roce.FrameTemplate(SRC, DST, sport=1, dqpn=1 << 24)


def test_psn_diff_wraps():
    assert roce.psn_diff(0, 0xFFFFFF) == 1
    assert roce.psn_diff(0xFFFFFF, 0) == -1
    assert roce.psn_diff(10, 3) == 7


def test_frame_priority_is_the_dscp_class_selector():
    """What a NIC holds back under a PFC PAUSE: RoCE data and ACKs on the job's
    priority, CNPs on theirs (as astral.p4 queues them)."""
    data = roce.FrameTemplate(SRC, DST, sport=50000, dqpn=5, dscp=priority_dscp(3))
    cnp = roce.FrameTemplate(SRC, DST, sport=50000, dqpn=5, dscp=CNP_DSCP, ecn=roce.ECN_NOT_ECT)
    assert roce.priority(data.frame(roce.SEND_ONLY, 1, b"x" * 64)) == 3
    assert roce.priority(data.ack(1, 1)) == 3
    assert roce.priority(cnp.cnp()) == 6
    assert IP(cnp.cnp()[roce.ETH_LEN:]).tos >> 2 == CNP_DSCP


@pytest.mark.parametrize("seed", range(20))
def test_template_headers_equal_scapy_for_any_fields(seed):
    """A template patches its addresses, TOS, TTL, port and QPN into one Scapy-built
    prototype: the frames equal Scapy's own build of those fields, whatever they are."""
    rng = random.Random(seed)
    mac = lambda: ":".join(f"{rng.randrange(256):02x}" for _ in range(6))   # noqa: E731
    ip = lambda: ".".join(str(rng.randrange(256)) for _ in range(4))         # noqa: E731
    src, dst = roce.Endpoint(mac(), ip()), roce.Endpoint(mac(), ip())
    sport, dqpn, dscp, ecn, ttl = (rng.randrange(1, 65536), rng.randrange(1 << 24), rng.randrange(64),
                                   rng.randrange(4), rng.randrange(256))
    tpl = roce.FrameTemplate(src, dst, sport, dqpn, dscp=dscp, ecn=ecn, ttl=ttl)
    payload = rng.randbytes(rng.randrange(1, 300))
    want = bytes(Ether(src=src.mac, dst=dst.mac)
                 / IP(src=src.ip, dst=dst.ip, tos=dscp << 2 | ecn, ttl=ttl, id=0, flags="DF")
                 / UDP(sport=sport, dport=4791, chksum=0)
                 / BTH(opcode=roce.SEND_LAST, dqpn=dqpn, psn=77, ackreq=1) / Raw(payload))
    assert tpl.frame(roce.SEND_LAST, 77, payload, ackreq=True) == want


def test_template_refuses_malformed_fields():
    for kwargs, match in [({"dscp": 64}, "DSCP"), ({"ecn": 4}, "ECN"), ({"ttl": 256}, "TTL")]:
        with pytest.raises(ValueError, match=match):
            roce.FrameTemplate(SRC, DST, sport=1, dqpn=1, **kwargs)
    with pytest.raises(ValueError, match="MAC address"):
        roce.FrameTemplate(roce.Endpoint("02:00:0a:00:01", "10.0.0.1"), DST, sport=1, dqpn=1)
    with pytest.raises(ValueError, match="IPv4 address"):
        roce.FrameTemplate(roce.Endpoint(SRC.mac, "10.0.0.300"), DST, sport=1, dqpn=1)
