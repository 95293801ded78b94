"""Compiled programs run on the v1model engine: the lowering keeps P4 semantics.

Each case sends one packet through `p4sim.switch.v1model.V1Switch` and checks the
bytes that come out against values worked out by hand from the P4-16 spec (width
wrap-around, saturation, two's complement, copy-in/copy-out of inlined calls,
``exit``/``return`` and table hit/miss control flow).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim.compiler import compile_file
from p4sim.switch.v1model import V1Switch, run_to_completion

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header calc_t { bit<8> a; bit<8> b; int<8> s; bit<8> r1; bit<8> r2; bit<8> r3; bit<8> r4; bit<16> r5; bit<8> trace; }
struct metadata { bit<8> tmp; bool seen; }
struct headers { ethernet_t ethernet; calc_t calc; }

bit<8> clamp(in bit<8> x, in bit<8> lo, in bit<8> hi) {
    if (x < lo) { return lo; }
    if (x > hi) { return hi; }
    return x;
}

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x1234: parse_calc; default: accept; }
    }
    state parse_calc { pkt.extract(hdr.calc); transition accept; }
}
control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control Tracer(inout bit<8> trace, in bit<8> bit_value) {
    action mark() { trace = trace | bit_value; }
    apply { mark(); }
}

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Tracer() t1;
    Tracer() t2;
    action swap(inout bit<8> x, inout bit<8> y) { bit<8> t = x; x = y; y = t; }
    action set_out(bit<9> port) { sm.egress_spec = port; }
    table route {
        key = { hdr.calc.a: exact; }
        actions = { set_out; NoAction; }
        const entries = { 1: set_out(3); }
        default_action = NoAction();
    }
    apply {
        if (!hdr.calc.isValid()) { exit; }
        hdr.calc.r1 = hdr.calc.a - hdr.calc.b;           // wraps modulo 256
        hdr.calc.r2 = hdr.calc.a |+| hdr.calc.b;         // saturates at 255
        hdr.calc.s = hdr.calc.s + 100;                    // two's complement wrap
        hdr.calc.r3 = clamp(hdr.calc.a, 10, 20);
        hdr.calc.r5 = hdr.calc.a ++ hdr.calc.b;
        hdr.calc.r4 = hdr.calc.r5[11:4];
        swap(hdr.calc.a, hdr.calc.b);
        t1.apply(hdr.calc.trace, 1);
        if (route.apply().hit) {
            t2.apply(hdr.calc.trace, 2);
            return;
        }
        hdr.calc.trace = hdr.calc.trace | 0x80;
        sm.egress_spec = 2;
    }
}
control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.calc); } }
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
"""

ETH = bytes.fromhex("000000000001" "000000000002" "1234")


@pytest.fixture(scope="module")
def switch(tmp_path_factory) -> V1Switch:
    path: Path = tmp_path_factory.mktemp("engine") / "calc.p4"
    path.write_text(PROGRAM)
    return V1Switch(compile_file(str(path)).bmv2_json)


def run(sw: V1Switch, a: int, b: int, s: int) -> tuple[int, bytes]:
    pkt = ETH + bytes([a, b, s & 0xFF, 0, 0, 0, 0, 0, 0, 0])
    (out,) = run_to_completion(sw, 0, pkt)
    return out[0], out[1][len(ETH):]


def test_arithmetic_and_inlining(switch):
    port, calc = run(switch, 5, 250, 100)
    a, b, s, r1, r2, r3, r4 = calc[:7]
    r5 = int.from_bytes(calc[7:9], "big")
    assert (a, b) == (250, 5)                  # swapped through inout action parameters
    assert r1 == (5 - 250) % 256 == 11
    assert r2 == 255                           # 5 |+| 250 saturates
    assert s == (100 + 100 - 256) & 0xFF       # int<8> 200 wraps to -56
    assert r3 == 10                            # clamp(5, 10, 20)
    assert r5 == 0x05FA and r4 == 0x5F         # concatenation, then bits 11..4
    assert (port, calc[9]) == (2, 0x81)        # miss: trace |= 0x80, egress 2


def test_hit_takes_the_return_path(switch):
    port, calc = run(switch, 2, 1, 0)          # the key is read after the swap: a == 1
    assert calc[4] == 3                        # 2 |+| 1
    assert calc[5] == 10
    assert (port, calc[9]) == (3, 0x03)        # both tracers ran, 0x80 skipped by return


def test_exit_leaves_other_packets_alone(switch):
    pkt = bytes.fromhex("000000000001" "000000000002" "0800") + b"\x45" * 20
    assert run_to_completion(switch, 4, pkt) == [(0, pkt)]


PARSING = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header opt_t { bit<8> len; varbit<64> data; }
header a_t { bit<8> x; }
header b_t { bit<16> y; }
header_union ab_t { a_t a; b_t b; }
struct metadata { bit<8> count; }
struct headers { ethernet_t ethernet; opt_t opt; ab_t u; }
parser Options(packet_in pkt, inout headers hdr, inout metadata meta) {
    state start {
        pkt.extract(hdr.opt, (bit<32>) hdr.opt.len * 8);
        transition accept;
    }
}
parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Options() options;
    bit<8> seen = 0x10;
    state start {
        pkt.extract(hdr.ethernet);
        transition select(pkt.lookahead<bit<8>>(), hdr.ethernet.etherType) {
            (_, 0x0001): opts;
            (0x00..0x7f, 0x0002): ua;
            (_, 0x0002): ub;
            default: accept;
        }
    }
    state opts { meta.count = seen; options.apply(pkt, hdr, meta); meta.count = meta.count + 1; transition accept; }
    state ua { pkt.extract(hdr.u.a); transition accept; }
    state ub { pkt.extract(hdr.u.b); transition accept; }
}
control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.opt.isValid()) { hdr.ethernet.etherType = (bit<16>) meta.count; }
        if (hdr.u.a.isValid()) { hdr.u.b.setValid(); hdr.u.b.y = 0xBEEF; }
    }
}
control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
"""


@pytest.fixture(scope="module")
def parsing(tmp_path_factory) -> V1Switch:
    path: Path = tmp_path_factory.mktemp("engine") / "parsing.p4"
    path.write_text(PARSING)
    return V1Switch(compile_file(str(path)).bmv2_json)


def eth(ethertype: int) -> bytes:
    return bytes.fromhex("000000000001000000000002") + ethertype.to_bytes(2, "big")


def test_sub_parser_varbit_and_parser_locals(parsing):
    pkt = eth(1) + bytes([2]) + b"AB" + b"payload"
    ((port, out),) = run_to_completion(parsing, 0, pkt)
    # the sub-parser extracted 2 bytes of options; count = 0x10 (local init) + 1
    assert out == eth(0x11) + bytes([2]) + b"AB" + b"payload"


def test_lookahead_range_and_header_union(parsing):
    ((_, out),) = run_to_completion(parsing, 0, eth(2) + bytes([0x05]) + b"rest")
    assert out == eth(2) + bytes.fromhex("BEEF") + b"rest"   # a replaced by b: the union keeps one
    ((_, out),) = run_to_completion(parsing, 0, eth(2) + bytes([0x85, 0x01]) + b"rest")
    assert out == eth(2) + bytes([0x85, 0x01]) + b"rest"     # 0x85 > 0x7f: parsed as b, unchanged
