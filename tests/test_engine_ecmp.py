"""LPM + ECMP (hash + next-hop table) + ECN marking on the hand-written BMv2 JSON
fixture `engine_fixtures/ecmp.json` (same shape as p4c's output)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from p4sim.switch import errors
from p4sim.switch.match import Exact, Lpm, Ternary
from p4sim.switch.v1model import V1Switch, run_to_completion

FIXTURE = Path(__file__).parent / "engine_fixtures" / "ecmp.json"
MAC1, MAC2 = 0x020000000001, 0x020000000002


def make_switch() -> V1Switch:
    sw = V1Switch(json.loads(FIXTURE.read_text()))
    sw.table_add("MyIngress.ecmp_group", "MyIngress.set_ecmp_select", [Lpm(0x0A000000, 8)], [0, 2])
    sw.table_add("MyIngress.ecmp_nhop", "MyIngress.set_nhop", [Exact(0)], [MAC1, 1])
    sw.table_add("MyIngress.ecmp_nhop", "MyIngress.set_nhop", [Exact(1)], [MAC2, 2])
    return sw


def udp_packet(src: str, dst: str, sport: int, dport: int, tos: int = 0, size: int = 64) -> bytes:
    pkt = bytes(Ether(dst="00:00:00:00:00:aa") / IP(src=src, dst=dst, tos=tos, ttl=64)
                / UDP(sport=sport, dport=dport))
    return pkt + b"\x00" * max(0, size - len(pkt))


def predicted_port(src: str, dst: str, proto: int, sport: int, dport: int) -> int:
    """ECMP member computed independently: crc32 over the 13-byte 5-tuple, mod 2."""
    five_tuple = (bytes(map(int, src.split("."))) + bytes(map(int, dst.split(".")))
                  + struct.pack("!BHH", proto, sport, dport))
    return 1 + zlib.crc32(five_tuple) % 2


def test_ecmp_port_matches_independent_crc32_prediction():
    sw = make_switch()
    seen = set()
    for sport in range(1000, 1040):
        data = udp_packet("10.1.0.1", "10.2.0.2", sport, 4791)
        out = run_to_completion(sw, 3, data)
        assert len(out) == 1
        port, pkt = out[0]
        assert port == predicted_port("10.1.0.1", "10.2.0.2", 17, sport, 4791)
        assert Ether(pkt).dst == ("02:00:00:00:00:01" if port == 1 else "02:00:00:00:00:02")
        seen.add(port)
    assert seen == {1, 2}


def test_tcp_ports_feed_the_hash_through_parser_set_ops():
    sw = make_switch()
    for sport in (1, 2, 3, 4, 5, 6):
        data = bytes(Ether() / IP(src="10.0.0.9", dst="10.7.7.7") / TCP(sport=sport, dport=80))
        (port, _pkt), = run_to_completion(sw, 0, data)
        assert port == predicted_port("10.0.0.9", "10.7.7.7", 6, sport, 80)


def test_ttl_decrement_and_ipv4_checksum_update():
    sw = make_switch()
    (_port, out), = run_to_completion(sw, 1, udp_packet("10.1.0.1", "10.2.0.2", 5, 6))
    ip = Ether(out)[IP]
    assert ip.ttl == 63
    recomputed = IP(bytes(ip))
    del recomputed.chksum
    assert ip.chksum == IP(bytes(recomputed)).chksum


def test_longest_prefix_wins_and_miss_drops():
    sw = make_switch()
    # a /16 inside 10/8 that always picks member 1 (base 1, count 1)
    sw.table_add("MyIngress.ecmp_group", "MyIngress.set_ecmp_select", [Lpm(0x0A020000, 16)], [1, 1])
    for sport in range(20):
        (port, _), = run_to_completion(sw, 1, udp_packet("10.1.0.1", "10.2.9.9", sport, 7))
        assert port == 2
    assert run_to_completion(sw, 1, udp_packet("10.1.0.1", "192.168.0.1", 1, 2)) == []


def test_ecn_marked_only_for_ect_packets_over_threshold():
    sw = make_switch()
    for tos, qdepth, expect_ecn in ((1, 10, 3), (2, 50, 3), (1, 9, 1), (0, 50, 0)):
        jobs = sw.run_ingress(1, udp_packet("10.1.0.1", "10.2.0.2", 9, 9, tos=tos))
        assert len(jobs) == 1
        [(_port, out)], more = sw.run_egress(jobs[0], qdepth, qdepth, 0, 0)
        assert Ether(out)[IP].tos & 3 == expect_ecn and more == []


def test_counters_and_direct_counters():
    sw = make_switch()
    sizes = [64, 100, 300]
    for size in sizes:
        run_to_completion(sw, 5, udp_packet("10.1.0.1", "10.2.0.2", 77, 88, size=size))
    assert sw.counter_read("MyIngress.port_pkts", 5) == (3, sum(sizes))
    assert sw.counter_read("MyIngress.port_pkts", 4) == (0, 0)
    member = predicted_port("10.1.0.1", "10.2.0.2", 17, 77, 88) - 1
    handle = [e.handle for e in sw.table_entries("MyIngress.ecmp_nhop")
              if e.match == [Exact(member)]][0]
    assert sw.table_counter_read("MyIngress.ecmp_nhop", handle) == (3, sum(sizes))
    sw.counter_reset("MyIngress.port_pkts")
    assert sw.counter_read("MyIngress.port_pkts", 5) == (0, 0)


def test_truncated_ipv4_sets_parser_error_and_packet_continues():
    sw = make_switch()
    eth = bytes(Ether(dst="00:00:00:00:00:aa", type=0x0800))
    data = eth + b"\x45\x00\x00\x14\x00\x00"  # 6 of 20 IPv4 bytes
    out = run_to_completion(sw, 2, data)
    # ipv4 stays invalid, so ingress routes nothing: egress_spec 0, packet unchanged
    assert out == [(0, data)]


def test_default_action_can_be_changed_and_reset():
    sw = make_switch()
    sw.table_set_default("MyIngress.ecmp_group", "MyIngress.set_ecmp_select", [1, 1])
    # the new default no longer drops, and a miss skips ecmp_nhop (`.apply().hit`):
    # egress_spec stays 0
    (port, pkt), = run_to_completion(sw, 1, udp_packet("10.1.0.1", "172.16.0.1", 1, 2))
    assert port == 0 and Ether(pkt)[IP].ttl == 64
    assert sw.table_get_default("MyIngress.ecmp_group") == ("MyIngress.set_ecmp_select", [1, 1])
    sw.table_reset_default("MyIngress.ecmp_group")
    assert sw.table_get_default("MyIngress.ecmp_group") == ("MyIngress.drop", [])
    assert run_to_completion(sw, 1, udp_packet("10.1.0.1", "172.16.0.1", 1, 2)) == []


def test_modify_and_delete_entries():
    sw = make_switch()
    h = sw.table_add("MyIngress.ecmp_group", "MyIngress.set_ecmp_select", [Lpm(0x0B000000, 8)], [1, 1])
    sw.table_modify("MyIngress.ecmp_group", h, "MyIngress.set_ecmp_select", [0, 1])
    (port, _), = run_to_completion(sw, 1, udp_packet("10.1.0.1", "11.0.0.1", 1, 2))
    assert port == 1
    sw.table_delete("MyIngress.ecmp_group", h)
    assert run_to_completion(sw, 1, udp_packet("10.1.0.1", "11.0.0.1", 1, 2)) == []
    # the freed handle is reused, like BMv2's handle manager
    assert sw.table_add("MyIngress.ecmp_group", "MyIngress.drop", [Lpm(0x0C000000, 8)], []) == h


@pytest.mark.parametrize("call, exc, words", [
    (lambda sw: sw.table_add("nope", "MyIngress.drop", [Exact(0)], []), errors.NoSuchName, "nope"),
    (lambda sw: sw.table_add("MyIngress.ecmp_nhop", "MyEgress.mark_ecn", [Exact(5)], []),
     errors.BadActionData, "MyEgress.mark_ecn"),
    (lambda sw: sw.table_add("MyIngress.ecmp_nhop", "MyIngress.set_nhop", [Exact(0)], [1, 1]),
     errors.DuplicateEntry, "already exists"),
    (lambda sw: sw.table_add("MyIngress.ecmp_nhop", "MyIngress.set_nhop", [Ternary(0, 1)], [1, 1]),
     errors.BadMatch, "Exact"),
    (lambda sw: sw.table_add("MyIngress.ecmp_nhop", "MyIngress.set_nhop", [Exact(5)], [1, 512]),
     errors.BadActionData, "9 bits"),
    (lambda sw: sw.table_add("MyIngress.ecmp_nhop", "MyIngress.set_nhop", [Exact(1 << 16)], [1, 1]),
     errors.BadMatch, "16 bits"),
    (lambda sw: sw.table_add("MyIngress.ecmp_group", "MyIngress.drop", [Lpm(0, 33)], []),
     errors.BadMatch, "prefix length"),
    (lambda sw: sw.table_add("MyIngress.ecmp_nhop", "MyIngress.set_nhop", [Exact(3)], [1, 1]),
     errors.TableFull, "full"),
    (lambda sw: sw.table_delete("MyIngress.ecmp_nhop", 99), errors.NoSuchEntry, "99"),
    (lambda sw: sw.counter_read("MyIngress.port_pkts", 512), errors.BadIndex, "512"),
    (lambda sw: sw.table_set_default("tbl_mark_ecn", "MyIngress.drop", []), errors.BadActionData,
     "MyIngress.drop"),
])
def test_errors_name_the_problem_and_leave_state_unchanged(call, exc, words):
    sw = make_switch()
    before = {t: sw.table_entries(t) for t in sw.tables}
    with pytest.raises(exc) as info:
        call(sw)
    assert isinstance(info.value, errors.StateError)
    assert words in str(info.value)
    assert {t: sw.table_entries(t) for t in sw.tables} == before
