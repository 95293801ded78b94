"""The front end loads real v1model programs and leaves them fully resolved and typed.

Programs: a P4-tutorial-style IPv4 forwarder first (the back end's first input),
then a program exercising the wider language (header stacks and unions, varbit,
serializable enums, value sets, lookahead, every table property, const entries with
priorities, switch, every v1model extern), then tutorial-style programs (calculator,
MRI), and V1MODEL_VERSION 20200408. Each test checks the contract documented in
`p4sim.compiler.typecheck`: every expression typed, every name bound, literals typed
by context, generic externs specialised.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from typing import Iterator

import pytest

from p4sim.compiler import ast
from p4sim.compiler import types as T
from p4sim.compiler.consteval import evaluate
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.frontend import load_program

BASIC = r"""/* -*- P4_16 -*- */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_IPV4 = 0x800;

typedef bit<9>  egressSpec_t;
typedef bit<48> macAddr_t;
typedef bit<32> ip4Addr_t;

header ethernet_t {
    macAddr_t dstAddr;
    macAddr_t srcAddr;
    bit<16>   etherType;
}

header ipv4_t {
    bit<4>    version;
    bit<4>    ihl;
    bit<8>    diffserv;
    bit<16>   totalLen;
    bit<16>   identification;
    bit<3>    flags;
    bit<13>   fragOffset;
    bit<8>    ttl;
    bit<8>    protocol;
    bit<16>   hdrChecksum;
    ip4Addr_t srcAddr;
    ip4Addr_t dstAddr;
}

struct metadata {
}

struct headers {
    ethernet_t   ethernet;
    ipv4_t       ipv4;
}

parser MyParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {

    state start {
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply {  }
}

control MyIngress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }

    action ipv4_forward(macAddr_t dstAddr, egressSpec_t port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table ipv4_lpm {
        key = {
            hdr.ipv4.dstAddr: lpm;
        }
        actions = {
            ipv4_forward;
            drop;
            NoAction;
        }
        size = 1024;
        default_action = drop();
    }

    apply {
        if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        }
    }
}

control MyEgress(inout headers hdr,
                 inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {  }
}

control MyComputeChecksum(inout headers  hdr, inout metadata meta) {
     apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version,
              hdr.ipv4.ihl,
              hdr.ipv4.diffserv,
              hdr.ipv4.totalLen,
              hdr.ipv4.identification,
              hdr.ipv4.flags,
              hdr.ipv4.fragOffset,
              hdr.ipv4.ttl,
              hdr.ipv4.protocol,
              hdr.ipv4.srcAddr,
              hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(
MyParser(),
MyVerifyChecksum(),
MyIngress(),
MyEgress(),
MyComputeChecksum(),
MyDeparser()
) main;
"""

WIDE = r"""#include <core.p4>
#include <v1model.p4>

#define MAX_HOPS 4
const bit<16> TYPE_IPV4 = 0x800;
const bit<16> TYPE_SRCROUTE = 0x1234;
const int STACK = MAX_HOPS + 1;
typedef bit<48> mac_t;
type bit<32> MyId_t;

enum bit<8> Proto { TCP = 6, UDP = 17, }
enum Color { RED, GREEN }

error { BadVersion, TooMany }

header ethernet_t { mac_t dst; mac_t src; bit<16> etherType; }
header srcRoute_t { bit<1> bos; bit<15> port; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<6> dscp; bit<2> ecn; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset; bit<8> ttl;
    bit<8> protocol; bit<16> hdrChecksum; bit<32> srcAddr; bit<32> dstAddr;
}
header ipv4_opt_t { varbit<320> options; }
header tcp_t { bit<16> srcPort; bit<16> dstPort; }
header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> len; bit<16> csum; }
header_union l4_t { tcp_t tcp; udp_t udp; }
header p4calc_t { bit<8> p; bit<8> four; bit<8> ver; bit<8> op; bit<32> a; bit<32> b; bit<32> res; }

@controller_header("packet_in")
header packet_in_t { bit<9> ingress_port; bit<7> _pad; }
@controller_header("packet_out")
header packet_out_t { bit<9> egress_port; bit<7> _pad; }

struct metadata {
    @field_list(1) bit<32> ecmp_select;
    bit<14> nhop;
    bit<1> hit;
    Color color;
    bit<8> tmp8;
    MyId_t id;
}
struct headers {
    packet_out_t pout;
    packet_in_t pin;
    ethernet_t ethernet;
    srcRoute_t[MAX_HOPS] srcRoutes;
    ipv4_t ipv4;
    ipv4_opt_t ipv4_opt;
    l4_t l4;
    p4calc_t calc;
}
struct digest_t { bit<48> src; bit<9> port; }

bit<8> max8(in bit<8> a, in bit<8> b) {
    if (a > b) { return a; }
    return b;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    value_set<bit<16>>(4) pvs;
    state start {
        transition select(standard_metadata.ingress_port) {
            64: parse_pout;
            default: parse_ethernet;
        }
    }
    state parse_pout { packet.extract(hdr.pout); transition parse_ethernet; }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            TYPE_SRCROUTE: parse_srcRouting;
            0x1000 &&& 0xF000: parse_calc;
            0x2000 .. 0x20FF: accept;
            pvs: accept;
            default: accept;
        }
    }
    state parse_srcRouting {
        packet.extract(hdr.srcRoutes.next);
        transition select(hdr.srcRoutes.last.bos) {
            1: parse_ipv4;
            default: parse_srcRouting;
        }
    }
    state parse_calc {
        transition select(packet.lookahead<p4calc_t>().p, packet.lookahead<p4calc_t>().four) {
            (0x50, 0x34): parse_calc2;
            (_, _): accept;
        }
    }
    state parse_calc2 { packet.extract(hdr.calc); transition accept; }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.BadVersion);
        packet.extract(hdr.ipv4_opt, (bit<32>)(((bit<16>)hdr.ipv4.ihl - 5) * 32));
        transition select(hdr.ipv4.protocol, hdr.ipv4.fragOffset) {
            (6, 0): parse_tcp;
            (17, 0): parse_udp;
            default: accept;
        }
    }
    state parse_tcp { packet.extract(hdr.l4.tcp); transition accept; }
    state parse_udp { packet.extract(hdr.l4.udp); packet.advance(32); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control Sub(inout headers hdr, in bit<8> x) {
    apply { hdr.ipv4.ttl = x; }
}

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    counter(64, CounterType.packets_and_bytes) port_counter;
    direct_counter(CounterType.packets) dc;
    meter(32w16, MeterType.bytes) m;
    direct_meter<bit<2>>(MeterType.packets) dm;
    register<bit<32>>(1024) reg;
    register<bit<1>>(4096) bloom;
    action_profile(128) ap;
    Sub() sub;
    bit<32> idx1;
    bit<32> idx2;
    const bit<8> K = 3;

    action drop() { mark_to_drop(standard_metadata); }
    action set_nhop(mac_t dmac, bit<9> port) {
        hdr.ethernet.dst = dmac;
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl |-| 1;
    }
    action set_ecmp(bit<16> base, bit<32> count) {
        hash(meta.ecmp_select, HashAlgorithm.crc16, base,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol, hdr.l4.tcp.srcPort },
             count);
    }
    action read_meter() { dm.read(meta.tmp8[1:0]); }
    action fwd(bit<9> port) { standard_metadata.egress_spec = port; dc.count(); }
    table ecmp_group {
        key = { hdr.ipv4.dstAddr: lpm @name("dst"); }
        actions = { drop; set_ecmp; @defaultonly NoAction; }
        size = 1024;
        default_action = drop;
    }
    table ecmp_nhop {
        key = { meta.ecmp_select: exact; hdr.ipv4.isValid(): exact; }
        actions = { set_nhop; drop; }
        const default_action = drop();
        counters = dc;
    }
    table acl {
        key = {
            hdr.ipv4.srcAddr: ternary;
            hdr.ipv4.protocol: range;
            hdr.l4.tcp.dstPort: optional;
        }
        actions = { drop; NoAction; fwd; }
        entries = {
            priority = 20: (0x0a000001 &&& 0xffffffff, 6 .. 17, 80) : drop();
            priority = 10: (_, _, _) : fwd(3);
            (0x0a000002, Proto.TCP, _): NoAction();
        }
        default_action = NoAction();
    }
    table sel {
        key = { hdr.ipv4.dstAddr: exact; meta.ecmp_select: selector; }
        actions = { set_nhop; }
        implementation = action_selector(HashAlgorithm.crc32, 32w64, 32w14);
    }
    table prof {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { set_nhop; read_meter; }
        implementation = ap;
        meters = dm;
        support_timeout = true;
    }
    apply {
        port_counter.count((bit<32>)standard_metadata.ingress_port);
        m.execute_meter((bit<32>)standard_metadata.ingress_port, meta.tmp8);
        if (hdr.srcRoutes[0].isValid()) {
            standard_metadata.egress_spec = (bit<9>)hdr.srcRoutes[0].port;
            hdr.srcRoutes.pop_front(1);
        } else if (hdr.ipv4.isValid()) {
            switch (ecmp_group.apply().action_run) {
                set_ecmp: { ecmp_nhop.apply(); }
                drop: { exit; }
                default: {}
            }
            if (!acl.apply().hit) { sel.apply(); }
            if (prof.apply().miss) { prof.apply(); }
        }
        hash(idx1, HashAlgorithm.crc32, 32w0, { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr }, 32w4096);
        hash(idx2, HashAlgorithm.crc16, 32w0, { hdr.ipv4.srcAddr }, 32w4096);
        bit<1> b1;
        bloom.read(b1, idx1);
        bloom.write(idx2, 1);
        bit<32> r;
        reg.read(r, 7);
        reg.write(7, r + 1);
        random(meta.tmp8, 0, 255);
        digest<digest_t>(1, { hdr.ethernet.src, standard_metadata.ingress_port });
        digest(1, { hdr.ethernet.src, standard_metadata.ingress_port });
        meta.tmp8 = max8(meta.tmp8, K);
        meta.tmp8 = (meta.tmp8 > 3) ? 8w1 : 8w2;
        bit<16> w = hdr.ipv4.totalLen << 2;
        bit<24> c = hdr.ipv4.ttl ++ hdr.ipv4.totalLen;
        w = w |+| 5;
        w = -w;
        w = ~w & 0xff;
        int<8> s = -8s3;
        s = s + (int<8>)meta.tmp8;
        meta.color = Color.GREEN;
        if (meta.color == Color.RED) { meta.hit = 1; }
        meta.id = (MyId_t)32w5;
        switch (meta.tmp8) {
            1: { meta.hit = 0; }
            2:
            3: { meta.hit = 1; }
        }
        bool flag = hdr.ipv4.ttl == 0 || !hdr.ipv4.isValid();
        if (flag && standard_metadata.parser_error != error.NoError) { drop(); return; }
        hdr.ipv4.ecn = 3;
        if (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2) {
            if (standard_metadata.enq_qdepth >= 19w10) { hdr.ipv4.ecn = 3; }
        }
        sub.apply(hdr, 8w4);
        clone(CloneType.I2E, 100);
        clone_preserving_field_list(CloneType.I2E, 100, 1);
        resubmit_preserving_field_list(1);
        truncate(64);
        log_msg("hello");
        log_msg("ttl={}", {hdr.ipv4.ttl});
        assert(hdr.ipv4.ttl != 0);
        assume(true);
        standard_metadata.mcast_grp = 1;
        hdr.pin.setValid();
        hdr.pin.ingress_port = standard_metadata.ingress_port;
        hdr.l4.tcp.setInvalid();
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    action mark_ecn() { hdr.ipv4.ecn = 3; }
    apply {
        if (hdr.ipv4.ecn == 1 && standard_metadata.enq_qdepth >= 10) { mark_ecn(); }
        recirculate_preserving_field_list(1);
        hdr.srcRoutes.push_front(1);
        hdr.srcRoutes[0].setValid();
        hdr.srcRoutes[0] = { 1, 5 };
        hdr.srcRoutes[1] = { bos = 0, port = 7 };
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.l4.udp.isValid(), { hdr.ipv4.srcAddr, 8w0, hdr.ipv4.protocol },
            hdr.l4.udp.csum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.pin);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.srcRoutes);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.l4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
"""

CALC = r"""
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
const bit<16> P4CALC_ETYPE = 0x1234;
const bit<8>  P4CALC_P     = 0x50;   // 'P'
const bit<8>  P4CALC_PLUS  = 0x2b;   // '+'
const bit<8>  P4CALC_AND   = 0x26;   // '&'

header p4calc_t { bit<8> p; bit<8> four; bit<8> ver; bit<8> op; bit<32> a; bit<32> b; bit<32> res; }
struct headers { ethernet_t ethernet; p4calc_t p4calc; }
struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            P4CALC_ETYPE : check_p4calc;
            default      : accept;
        }
    }
    state check_p4calc {
        transition select(packet.lookahead<p4calc_t>().p,
                          packet.lookahead<p4calc_t>().four,
                          packet.lookahead<p4calc_t>().ver) {
            (P4CALC_P, 0x34, 0x01) : parse_p4calc;
            default                : accept;
        }
    }
    state parse_p4calc { packet.extract(hdr.p4calc); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    action send_back(bit<32> result) {
        bit<48> tmp;
        hdr.p4calc.res = result;
        tmp = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = tmp;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }
    action operation_add() { send_back(hdr.p4calc.a + hdr.p4calc.b); }
    action operation_and() { send_back(hdr.p4calc.a & hdr.p4calc.b); }
    action operation_drop() { mark_to_drop(standard_metadata); }
    table calculate {
        key = { hdr.p4calc.op : exact; }
        actions = { operation_add; operation_and; operation_drop; }
        const default_action = operation_drop();
        const entries = {
            P4CALC_PLUS : operation_add();
            P4CALC_AND  : operation_and();
        }
    }
    apply {
        if (hdr.p4calc.isValid()) { calculate.apply(); } else { operation_drop(); }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    apply { }
}
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); packet.emit(hdr.p4calc); }
}
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
"""

MRI = r"""
#include <core.p4>
#include <v1model.p4>

const bit<5>  IPV4_OPTION_MRI = 31;
#define MAX_HOPS 9

typedef bit<32> switchID_t;
typedef bit<32> qdepth_t;

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header ipv4_option_t { bit<1> copyFlag; bit<2> optClass; bit<5> option; bit<8> optionLength; }
header mri_t { bit<16> count; }
header switch_t { switchID_t swid; qdepth_t qdepth; }

struct ingress_metadata_t { bit<16> count; }
struct parser_metadata_t { bit<16> remaining; }
struct metadata { ingress_metadata_t ingress_metadata; parser_metadata_t parser_metadata; }
struct headers {
    ethernet_t ethernet;
    ipv4_t ipv4;
    ipv4_option_t ipv4_option;
    mri_t mri;
    switch_t[MAX_HOPS] swtraces;
}

error { IPHeaderTooShort }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start { transition parse_ethernet; }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.ihl >= 5, error.IPHeaderTooShort);
        transition select(hdr.ipv4.ihl) { 5: accept; default: parse_ipv4_option; }
    }
    state parse_ipv4_option {
        packet.extract(hdr.ipv4_option);
        transition select(hdr.ipv4_option.option) { IPV4_OPTION_MRI: parse_mri; default: accept; }
    }
    state parse_mri {
        packet.extract(hdr.mri);
        meta.parser_metadata.remaining = hdr.mri.count;
        transition select(meta.parser_metadata.remaining) { 0: accept; default: parse_swtrace; }
    }
    state parse_swtrace {
        packet.extract(hdr.swtraces.next);
        meta.parser_metadata.remaining = meta.parser_metadata.remaining - 1;
        transition select(meta.parser_metadata.remaining) { 0: accept; default: parse_swtrace; }
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    apply { standard_metadata.egress_spec = 2; }
}
control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    action add_swtrace(switchID_t swid) {
        hdr.mri.count = hdr.mri.count + 1;
        hdr.swtraces.push_front(1);
        hdr.swtraces[0].setValid();
        hdr.swtraces[0].swid = swid;
        hdr.swtraces[0].qdepth = (qdepth_t)standard_metadata.deq_qdepth;
        hdr.ipv4.ihl = hdr.ipv4.ihl + 2;
        hdr.ipv4_option.optionLength = hdr.ipv4_option.optionLength + 8;
        hdr.ipv4.totalLen = hdr.ipv4.totalLen + 8;
    }
    table swtrace {
        actions = { add_swtrace; NoAction; }
        default_action = NoAction();
    }
    apply { if (hdr.mri.isValid()) { swtrace.apply(); } }
}
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_option);
        packet.emit(hdr.mri);
        packet.emit(hdr.swtraces);
    }
}
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
"""

V1MODEL_2020 = r"""
#include <core.p4>
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

header h_t { bit<8> a; bit<16> b; }
struct headers { h_t h; }
struct meta_t { bit<8> idx; bit<16> val; }

parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<16>, bit<8>>(256) r;
    counter<bit<8>>(256, CounterType.packets) c;
    apply {
        r.read(m.val, m.idx);
        r.write(hdr.h.a, hdr.h.b);
        c.count(m.idx);
        PortId_t port = sm.ingress_port;
        sm.egress_spec = port;
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""

MISC = r"""#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; }
header g_t { bit<32> c; }
header_union u_t { h_t h; g_t g; }
struct headers { h_t h; h_t h2; u_t[2] us; }
enum Color { RED, GREEN }
struct meta_t { bit<8> x; bit<16> y; Color col; bool flag; error err; int<8> s; }
const bool DEBUG = false;

parser Sub(packet_in pkt, inout headers hdr) {
    state start { pkt.extract(hdr.h2); transition accept; }
}
parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    Sub() sub;
    state start {
        bit<16> la = pkt.lookahead<bit<16>>();
        pkt.advance(8 * 4);
        pkt.extract(hdr.h);
        sub.apply(pkt, hdr);
        verify(hdr.h.a != 0, error.NoMatch);
        transition select(la) {
            0: reject;
            1: parse_u;
            default: accept;
        }
    }
    state parse_u { pkt.extract(hdr.us.next.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    Checksum16() ck;
    action a(bit<8> v) { m.x = v; exit; }
    action b() { m.x[3:0] = 4w7; }
    table t {
        key = { m.col: exact; m.err: exact; }
        actions = { a; b; }
    }
    table empty { actions = { b; } }
    apply {
        if (m.x == 1) a(2); else b();
        m.flag = (bool)m.x[0:0];
        m.x = (bit<8>)(bit<1>)m.flag;
        m.y = 8w0 ++ m.x;
        m.s = -8s1;
        m.s = -1;
        m.y = t.apply().hit ? 16w1 : 16w2;
        if (hdr.h == hdr.h2) { empty.apply(); }
        m.y = ck.get({hdr.h.a, hdr.h.b});
        a(v = 3);
        if (DEBUG) { m.x = 1; }
        @atomic { m.x = m.x + 1; }
        m.col = m.col == Color.RED ? Color.GREEN : Color.RED;
        if (hdr.us[0].isValid()) { hdr.us[1].g.setValid(); }
        m.x = (bit<8>)(m.y >> 8);
        m.y = m.y << m.x;
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""

NEWTYPE = r"""#include <core.p4>
#include <v1model.p4>
@p4runtime_translation("p4.org/psa/v1/PortId_t", 32)
type bit<9> port_t;
@name("x") type bit<32> other_t;
header h_t { bit<8> type; bit<16> key; bit<8> priority; }
struct headers { h_t h; }
struct meta_t { port_t p; other_t o; }
parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    action fwd(port_t p) { sm.egress_spec = (bit<9>)p; }
    table t { key = { m.p: exact; hdr.h.type: exact; } actions = { fwd; } }
    apply { m.p = (port_t)sm.ingress_port; hdr.h.key = 1; t.apply(); }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""

MISC2 = r"""#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; bool f; bit<7> pad; }
struct headers { h_t h; }
struct pair_t { bit<8> a; bit<16> b; }
struct meta_t { bit<8> x; bit<16> y; }
typedef register<bit<32>> reg_t;
extern Foo { Foo(); abstract void f(); }
@structured[k = 1, v = "x"]
struct other_t { bit<8> z; }
pair_t mk(in bit<8> a) { pair_t p = { a = a, b = 16w3 }; return p; }
parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    value_set<pair_t>(4) pvs;
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.a, hdr.h.b) { pvs: accept; default: reject; }
    }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    reg_t(16) r;
    apply {
        tuple<bit<8>, bit<16>> t = {1, 2};
        hdr.h = {1, 2, true, 0};
        pair_t p = mk(m.x);
        m.y = p.b;
        r.write(0, (bit<32>)p.a);
        m.x = t[0];
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""

#: standard_metadata_t as BMv2 expects it (p4c's v1model.p4): name and width, in order.
STANDARD_METADATA = [
    ("ingress_port", 9), ("egress_spec", 9), ("egress_port", 9), ("instance_type", 32),
    ("packet_length", 32), ("enq_timestamp", 32), ("enq_qdepth", 19), ("deq_timedelta", 32),
    ("deq_qdepth", 19), ("ingress_global_timestamp", 48), ("egress_global_timestamp", 48),
    ("mcast_grp", 16), ("egress_rid", 16), ("checksum_error", 1), ("parser_error", None),
    ("priority", 3),
]


def load(tmp_path, text: str, name: str = "prog.p4", **kw) -> ast.Program:
    path = tmp_path / name
    path.write_text(text)
    return load_program(str(path), **kw)


def walk(node: object) -> Iterator[ast.Node]:
    """Every AST node reachable from ``node`` in source order (not following ref/type
    links)."""
    stack = [node]
    seen: set[int] = set()
    while stack:
        n = stack.pop()
        if isinstance(n, (list, tuple)):
            stack.extend(reversed(n))
            continue
        if not isinstance(n, ast.Node) or id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        children = [getattr(n, f.name) for f in dataclasses.fields(n)
                    if f.name not in ("pos", "type", "ref", "enum", "member_pos")]
        stack.extend(reversed(children))


def assert_fully_typed(prog: ast.Program) -> None:
    for n in walk(prog):
        if isinstance(n, ast.Expr):
            assert n.type is not None, f"untyped {type(n).__name__} at {n.pos}"
        if isinstance(n, ast.PathExpr):
            assert n.ref is not None, f"unbound name {n.name} at {n.pos}"
        if isinstance(n, ast.TypeRef):
            assert n.type is not None, f"unresolved type at {n.pos}"


def decl(scope: object, name: str) -> ast.Decl:
    decls = scope.decls if isinstance(scope, ast.Program) else scope.locals  # type: ignore[attr-defined]
    found = [d for d in decls if d.name == name]
    assert found, name
    return found[0]


def user_nodes(prog: ast.Program, cls: type, file_suffix: str = "prog.p4") -> list:
    return [n for n in walk(prog) if isinstance(n, cls) and n.pos.file.endswith(file_suffix)]


# ------------------------------------------------------------------ the tutorial program


def test_basic_ipv4_forwarding_is_fully_typed(tmp_path) -> None:
    prog = load(tmp_path, BASIC)
    assert_fully_typed(prog)
    names = [d.name for d in prog.decls if d.pos.file.endswith("prog.p4")]
    assert names[:3] == ["TYPE_IPV4", "egressSpec_t", "macAddr_t"]
    assert names[-1] == "main"


def test_basic_ipv4_names_and_types(tmp_path) -> None:
    prog = load(tmp_path, BASIC)
    ingress = decl(prog, "MyIngress")
    assert isinstance(ingress, ast.ControlDecl)
    fwd = decl(ingress, "ipv4_forward")
    assert [(p.name, p.direction, p.type_ref.type) for p in fwd.params] == [
        ("dstAddr", None, T.BitT(48)), ("port", None, T.BitT(9))]
    spec, _src, _dst, ttl = fwd.body.stmts
    assert isinstance(spec.lhs, ast.MemberExpr) and spec.lhs.type == T.BitT(9)
    assert isinstance(spec.rhs, ast.PathExpr) and spec.rhs.ref is fwd.params[1]
    # ttl - 1: the unsized literal takes the width of the other operand, value kept
    assert ttl.rhs.type == T.BitT(8)
    assert isinstance(ttl.rhs.right, ast.IntLit) and ttl.rhs.right.type == T.BitT(8)
    assert ttl.rhs.right.value == 1
    table = decl(ingress, "ipv4_lpm")
    assert isinstance(table, ast.TableDecl)
    assert [(k.match_kind, k.expr.type) for k in table.keys] == [("lpm", T.BitT(32))]
    refs = [a.name.ref for a in table.actions]
    assert [r.name for r in refs] == ["ipv4_forward", "drop", "NoAction"]
    assert all(isinstance(r, ast.ActionDecl) for r in refs)
    assert table.default_action.name.ref is decl(ingress, "drop")
    assert evaluate(table.prop("size").value) == 1024
    # the TYPE_IPV4 in the select resolves to the constant
    parser = decl(prog, "MyParser")
    case = parser.states[1].transition.cases[0]
    assert case.keyset[0].ref is decl(prog, "TYPE_IPV4") and case.keyset[0].type == T.BitT(16)
    assert [c.next_state for c in parser.states[1].transition.cases] == ["parse_ipv4", "accept"]
    # main = V1Switch(MyParser(), ...): constructor calls typed as the blocks
    main = decl(prog, "main")
    assert isinstance(main, ast.InstantiationDecl) and isinstance(main.type_ref.type, T.PackageT)
    kinds = [type(a.value.type).__name__ for a in main.args]
    assert kinds == ["ParserT", "ControlT", "ControlT", "ControlT", "ControlT", "ControlT"]
    assert [a.value.type.name for a in main.args][2] == "MyIngress"


def test_basic_checksum_call_is_specialised(tmp_path) -> None:
    prog = load(tmp_path, BASIC)
    call = decl(prog, "MyComputeChecksum").apply.stmts[0].call
    assert call.target.ref.name == "update_checksum"
    data_t, cksum_t = call.target.type.params[1], call.target.type.params[2]
    assert isinstance(data_t, T.TupleT) and len(data_t.elements) == 11
    assert data_t.elements[:2] == (T.BitT(4), T.BitT(4))
    assert cksum_t == T.BitT(16)
    algo = call.args[3].value
    assert isinstance(algo.ref, ast.EnumMember) and algo.ref.name == "csum16"
    assert algo.ref.enum.name == "HashAlgorithm"


def test_standard_metadata_matches_bmv2(tmp_path) -> None:
    prog = load(tmp_path, BASIC)
    sm = decl(prog, "standard_metadata_t")
    got = [(f.name, f.type_ref.type.width if isinstance(f.type_ref.type, T.BitT) else None)
           for f in sm.fields]
    assert got == STANDARD_METADATA
    assert sm.fields[-2].type_ref.type == T.ErrorT()
    assert sm.annotation("name").args[0].value == "standard_metadata"
    algos = decl(prog, "HashAlgorithm")
    assert [m.name for m in algos.members] == [
        "crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16", "xor16"]


# ------------------------------------------------------------------ the wider language


def test_wide_program_is_fully_typed(tmp_path) -> None:
    prog = load(tmp_path, WIDE)
    assert_fully_typed(prog)


def test_wide_types_of_declarations(tmp_path) -> None:
    prog = load(tmp_path, WIDE)
    hdrs = decl(prog, "headers")
    types = {f.name: f.type_ref.type for f in hdrs.fields}
    assert types["srcRoutes"] == T.StackT(types["srcRoutes"].element, 4)
    assert types["srcRoutes"].element.bit_width == 16
    assert isinstance(types["l4"], T.HeaderUnionT)
    assert types["ipv4_opt"].fields[0].type == T.VarbitT(320)
    proto = decl(prog, "Proto")
    assert [m.name for m in proto.members] == ["TCP", "UDP"]
    meta = {f.name: f.type_ref.type for f in decl(prog, "metadata").fields}
    assert meta["id"] == T.NewT("MyId_t", T.BitT(32))
    assert meta["color"] == T.EnumT("Color", ("RED", "GREEN"))
    assert decl(prog, "metadata").fields[0].annotation("field_list").args[0].value == 1
    assert evaluate(decl(prog, "STACK").value) == 5
    assert [m.name for m in proto.members] == ["TCP", "UDP"]
    assert decl(prog, "packet_in_t").annotation("controller_header").args[0].value == "packet_in"


def test_wide_parser(tmp_path) -> None:
    prog = load(tmp_path, WIDE)
    parser = decl(prog, "MyParser")
    states = {s.name: s for s in parser.states}
    cases = states["parse_ethernet"].transition.cases
    mask = cases[2].keyset[0]
    assert isinstance(mask, ast.BinaryExpr) and mask.op == "&&&" and mask.type == T.BitT(16)
    assert mask.left.type == T.BitT(16) and evaluate(mask.right) == 0xF000
    rng = cases[3].keyset[0]
    assert rng.op == ".." and (evaluate(rng.left), evaluate(rng.right)) == (0x2000, 0x20FF)
    assert isinstance(cases[4].keyset[0].ref, ast.ValueSetDecl)
    assert isinstance(cases[5].keyset[0], ast.DefaultExpr)
    # lookahead<p4calc_t>() returns the header type; .p is its field
    key = states["parse_calc"].transition.keys[0]
    assert key.type == T.BitT(8) and key.expr.type.name == "p4calc_t"
    assert [type(k).__name__ for k in states["parse_calc"].transition.cases[1].keyset] == [
        "DontCareExpr", "DontCareExpr"]
    nxt = states["parse_srcRouting"].stmts[0].call.args[0].value
    assert nxt.member == "next" and nxt.type.name == "srcRoute_t"
    extract2 = states["parse_ipv4"].stmts[2].call
    assert extract2.target.ref.name == "extract" and len(extract2.target.ref.params) == 2
    verify = states["parse_ipv4"].stmts[1].call
    err = verify.args[1].value
    assert err.type == T.ErrorT() and err.member == "BadVersion"
    assert isinstance(err.expr, ast.TypeNameExpr) and err.expr.type_ref.name == "error"


def test_wide_tables(tmp_path) -> None:
    prog = load(tmp_path, WIDE)
    ing = decl(prog, "MyIngress")
    acl = decl(ing, "acl")
    assert [k.match_kind for k in acl.keys] == ["ternary", "range", "optional"]
    assert not acl.entries_const and len(acl.entries) == 3
    first, second, third = acl.entries
    assert first.keys[0].op == "&&&" and first.keys[1].op == ".."
    assert first.keys[1].left.type == T.BitT(8)
    assert evaluate(second.priority) == 10 and second.action.args[0].value.type == T.BitT(9)
    assert third.keys[1].ref.name == "TCP"
    nhop = decl(ing, "ecmp_nhop")
    assert nhop.default_action_const and nhop.prop("counters").value.ref.name == "dc"
    assert nhop.keys[1].expr.type == T.BoolT()
    sel = decl(ing, "sel")
    impl = sel.prop("implementation").value
    assert isinstance(impl, ast.CallExpr) and isinstance(impl.target, ast.TypeNameExpr)
    assert impl.type.name == "action_selector"
    assert [a.value.type for a in impl.args][1:] == [T.BitT(32), T.BitT(32)]
    group = decl(ing, "ecmp_group")
    assert group.actions[2].annotations[0].name == "defaultonly"
    assert group.keys[0].annotations[0].args[0].value == "dst"
    prof = decl(ing, "prof")
    assert prof.prop("implementation").value.ref.name == "ap"
    assert prof.prop("support_timeout").value.type == T.BoolT()


def test_wide_externs_are_specialised(tmp_path) -> None:
    prog = load(tmp_path, WIDE)
    ing = decl(prog, "MyIngress")
    reg = decl(ing, "reg")
    assert reg.type_ref.type == T.ExternT("register", (T.BitT(32),))
    dm = decl(ing, "dm")
    assert dm.type_ref.type == T.ExternT("direct_meter", (T.BitT(2),))
    calls = {}
    for n in walk(ing.apply):
        if isinstance(n, ast.CallExpr) and isinstance(n.target, (ast.PathExpr, ast.MemberExpr)):
            name = n.target.name if isinstance(n.target, ast.PathExpr) else n.target.member
            calls.setdefault(name, []).append(n)
    h = calls["hash"][0]
    assert h.target.type.params[0] == T.BitT(32) and h.target.type.params[2] == T.BitT(32)
    assert h.target.type.params[3] == T.TupleT((T.BitT(32), T.BitT(32)))
    read = calls["read"][1]
    assert read.target.ref.name == "read" and isinstance(read.target.ref, ast.MethodProto)
    assert read.target.type.params == (T.BitT(32), T.BitT(32))
    assert read.args[1].value.type == T.BitT(32)  # literal 7 typed as the index
    d1, d2 = calls["digest"]
    assert d1.target.type.params[1].name == "digest_t"
    assert isinstance(d2.target.type.params[1], T.TupleT)
    assert calls["random"][0].args[1].value.type == T.BitT(8)
    assert calls["max8"][0].target.ref.name == "max8"
    assert calls["apply"][-1].target.expr.ref.name == "sub"
    assert calls["log_msg"][1].target.ref.proto.params[1].name == "data"


def test_wide_expressions(tmp_path) -> None:
    prog = load(tmp_path, WIDE)
    ing = decl(prog, "MyIngress")
    by_name = {s.name: s for s in ing.apply.stmts if isinstance(s, ast.VarDecl)}
    assert by_name["c"].init.type == T.BitT(24)
    assert by_name["w"].init.type == T.BitT(16) and by_name["w"].init.op == "<<"
    assert by_name["s"].init.type == T.BitT(8, signed=True)
    assert by_name["flag"].init.type == T.BoolT()
    slices = [n for n in walk(ing) if isinstance(n, ast.SliceExpr)]
    assert slices and slices[0].type == T.BitT(2)
    switches = [s for s in walk(ing.apply) if isinstance(s, ast.SwitchStmt)]
    run, value = switches
    assert isinstance(run.expr.type, T.ActionEnumT) and run.expr.type.table == "ecmp_group"
    assert run.cases[0].label.ref is decl(ing, "set_ecmp")
    assert isinstance(run.cases[2].label, ast.DefaultExpr)
    assert value.cases[1].body is None and value.cases[1].label.type == T.BitT(8)
    color = [n for n in walk(ing.apply) if isinstance(n, ast.MemberExpr) and n.member == "GREEN"][0]
    assert isinstance(color.ref, ast.EnumMember) and color.type.name == "Color"
    eg = decl(prog, "MyEgress")
    init = [s for s in eg.apply.stmts if isinstance(s, ast.AssignStmt)]
    assert init[-2].rhs.type.name == "srcRoute_t" and init[-1].rhs.type.name == "srcRoute_t"


# ------------------------------------------------------------------ tutorial-style programs


def test_calculator_with_lookahead_and_const_entries(tmp_path) -> None:
    prog = load(tmp_path, CALC)
    assert_fully_typed(prog)
    ing = decl(prog, "MyIngress")
    table = decl(ing, "calculate")
    assert [e.keys[0].ref.name for e in table.entries] == ["P4CALC_PLUS", "P4CALC_AND"]
    assert [evaluate(e.keys[0]) for e in table.entries] == [0x2B, 0x26]
    add = decl(ing, "operation_add")
    call = add.body.stmts[0].call
    assert call.target.ref is decl(ing, "send_back") and call.args[0].value.type == T.BitT(32)


def test_mri_with_stack_push_and_parser_loop(tmp_path) -> None:
    prog = load(tmp_path, MRI)
    assert_fully_typed(prog)
    eg = decl(prog, "MyEgress")
    stmts = decl(eg, "add_swtrace").body.stmts
    assert stmts[1].call.target.member == "push_front"
    assert stmts[4].rhs.type == T.BitT(32) and isinstance(stmts[4].rhs, ast.CastExpr)
    hdrs = {f.name: f.type_ref.type for f in decl(prog, "headers").fields}
    assert hdrs["swtraces"].size == 9
    parser = decl(prog, "MyParser")
    assert [s.transition.cases[1].next_state for s in parser.states[-2:]] == ["parse_swtrace"] * 2


def test_v1model_20200408_generic_index_types(tmp_path) -> None:
    prog = load(tmp_path, V1MODEL_2020)
    assert_fully_typed(prog)
    ing = decl(prog, "I")
    assert decl(ing, "r").type_ref.type == T.ExternT("register", (T.BitT(16), T.BitT(8)))
    calls = [n for n in walk(ing.apply) if isinstance(n, ast.CallExpr)]
    read, write, count = calls
    assert read.target.type.params == (T.BitT(16), T.BitT(8))
    assert write.target.type.params == (T.BitT(8), T.BitT(16))
    assert count.target.type.params == (T.BitT(8),)
    port = [s for s in ing.apply.stmts if isinstance(s, ast.VarDecl)][0]
    assert port.type_ref.type == T.BitT(9)
    assert evaluate(decl(prog, "__v1model_version").value) == 20200408


def test_default_v1model_version_is_p4c_default(tmp_path) -> None:
    prog = load(tmp_path, BASIC)
    assert evaluate(decl(prog, "__v1model_version").value) == 20180101


def test_defines_and_include_dirs(tmp_path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "hdrs.p4").write_text("header h_t { bit<WIDTH> f; }\n")
    text = BASIC.replace("const bit<16> TYPE_IPV4", '#include "hdrs.p4"\nconst bit<WIDTH> X = 3;\n'
                         "#ifndef __TARGET_BMV2__\n#error p4c-bm2-ss defines __TARGET_BMV2__\n#endif\n"
                         "const bit<16> TYPE_IPV4")
    prog = load(tmp_path, text, include_dirs=[str(inc)], defines={"WIDTH": "24"})
    h = decl(prog, "h_t")
    assert h.fields[0].type_ref.type == T.BitT(24)
    assert decl(prog, "X").type_ref.type == T.BitT(24)
    assert h.pos.file.endswith("hdrs.p4") and h.pos.line == 1


def test_annotations_everywhere(tmp_path) -> None:
    text = BASIC.replace("table ipv4_lpm {", '@name("route") @id(7) table ipv4_lpm {').replace(
        "hdr.ipv4.dstAddr: lpm;", 'hdr.ipv4.dstAddr: lpm @name("dst");').replace(
        "action drop() {", '@hidden action drop() {').replace(
        "macAddr_t dstAddr;", '@brief("d") macAddr_t dstAddr;')
    prog = load(tmp_path, text)
    ing = decl(prog, "MyIngress")
    t = decl(ing, "ipv4_lpm")
    assert [a.name for a in t.annotations] == ["name", "id"]
    assert t.annotation("id").args[0].value == 7 and t.annotation("id").args[0].type == T.InfIntT()
    assert t.keys[0].annotations[0].args[0].value == "dst"
    assert decl(ing, "drop").annotation("hidden") is not None
    assert decl(prog, "ethernet_t").fields[0].annotation("brief").args[0].value == "d"


def test_functions_and_generic_functions(tmp_path) -> None:
    text = BASIC.replace(
        "control MyVerifyChecksum",
        "bit<8> dec(in bit<8> v) { return v - 1; }\n"
        "T pick<T>(in bool c, in T a, in T b) { if (c) { return a; } return b; }\n"
        "control MyVerifyChecksum").replace(
        "hdr.ipv4.ttl = hdr.ipv4.ttl - 1;",
        "hdr.ipv4.ttl = dec(hdr.ipv4.ttl);\n"
        "        hdr.ethernet.etherType = pick(true, hdr.ethernet.etherType, 16w1);")
    prog = load(tmp_path, text)
    assert_fully_typed(prog)
    fwd = decl(decl(prog, "MyIngress"), "ipv4_forward")
    call = fwd.body.stmts[4].rhs
    assert call.type == T.BitT(16) and call.target.type.params == (T.BoolT(), T.BitT(16), T.BitT(16))


def test_programs_of_the_test_corpus_load() -> None:
    """Every good program the project keeps (tests/p4/good) passes the front end."""
    root = os.path.join(os.path.dirname(__file__), "p4", "good")
    paths = sorted(glob.glob(os.path.join(root, "**", "*.p4"), recursive=True))
    failures = []
    for p in paths:
        try:
            assert_fully_typed(load_program(p))
        except CompileError as e:
            failures.append(e.render())
    assert not failures, "\n".join(failures)


def test_grammar_rejects_unsupported_initializer_blocks(tmp_path) -> None:
    text = BASIC.replace("    action drop() {",
                         "    Checksum16() ck = { void f() {} };\n    action drop() {")
    with pytest.raises(CompileError) as info:
        load(tmp_path, text)
    assert info.value.kind == "unsupported"


def test_sub_parsers_unions_and_odd_corners(tmp_path) -> None:
    prog = load(tmp_path, MISC)
    assert_fully_typed(prog)
    parser = decl(prog, "P")
    start = parser.states[0]
    la = start.stmts[0]
    assert la.init.type == T.BitT(16) and la.init.target.member == "lookahead"
    assert start.stmts[1].call.args[0].value.type == T.BitT(32)  # 8 * 4 for advance
    sub_call = start.stmts[3].call
    assert sub_call.target.member == "apply" and sub_call.target.expr.ref is decl(parser, "sub")
    assert start.transition.cases[0].next_state == "reject"
    union_next = parser.states[1].stmts[0].call.args[0].value
    assert union_next.type.name == "h_t" and union_next.expr.type.name == "u_t"
    ing = decl(prog, "I")
    stmts = ing.apply.stmts
    assert isinstance(stmts[0], ast.IfStmt) and isinstance(stmts[0].else_, ast.CallStmt)
    assert stmts[1].rhs.type == T.BoolT() and stmts[1].rhs.expr.type == T.BitT(1)
    assert stmts[3].rhs.type == T.BitT(16)
    assert stmts[5].rhs.type == T.BitT(8, signed=True)
    assert stmts[6].rhs.then.type == T.BitT(16)
    assert stmts[7].cond.left.type.name == "h_t"
    assert stmts[8].rhs.target.ref.name == "get" and stmts[8].rhs.type == T.BitT(16)
    named = stmts[9].call.args[0]
    assert named.name == "v" and named.value.type == T.BitT(8)
    assert isinstance(stmts[10].cond.ref, ast.ConstDecl)
    t = decl(ing, "t")
    assert [k.expr.type for k in t.keys] == [T.EnumT("Color", ("RED", "GREEN")), T.ErrorT()]
    assert decl(ing, "empty").keys == []


def test_newtypes_and_keyword_named_fields(tmp_path) -> None:
    prog = load(tmp_path, NEWTYPE)
    assert_fully_typed(prog)
    port = decl(prog, "port_t")
    assert port.is_new_type and port.annotation("p4runtime_translation").args[1].value == 32
    assert [f.name for f in decl(prog, "h_t").fields] == ["type", "key", "priority"]
    ing = decl(prog, "I")
    assert decl(ing, "t").keys[0].expr.type == T.NewT("port_t", T.BitT(9))
    assert decl(ing, "fwd").params[0].type_ref.type == T.NewT("port_t", T.BitT(9))
    assert ing.apply.stmts[1].rhs.type == T.BitT(16)


def test_constant_evaluation_follows_p4_widths(tmp_path) -> None:
    consts = """
const bit<8>  WRAP   = 250 + 10;
const bit<8>  SAT    = 8w250 |+| 8w10;
const bit<8>  SATSUB = 8w5 |-| 8w10;
const int<8>  SWRAP  = -128 - 1;
const bit<16> CAT    = 8w1 ++ 8w2;
const bit<8>  CAST   = (bit<8>)16w0x1ff;
const bit<4>  SLICE  = CAT[11:8];
const bool    LOGIC  = 3 > 2 && !false;
const bit<8>  SHIFT  = ~8w0 >> 4;
const int<8>  NEG    = (int<8>)8w255;
const int     BIG    = 1 << 40;
enum bit<8> Code { LOW = 1 + 2, HIGH = 0xF0 }
const bit<8>  ENUMV  = (bit<8>)Code.HIGH;
"""
    prog = load(tmp_path, BASIC.replace("const bit<16> TYPE_IPV4 = 0x800;",
                                        "const bit<16> TYPE_IPV4 = 0x800;\n" + consts))
    values = {d.name: evaluate(d.value) for d in prog.decls if isinstance(d, ast.ConstDecl)}
    assert values["WRAP"] == 4 and values["SAT"] == 255 and values["SATSUB"] == 0
    assert values["SWRAP"] == 127 and values["CAT"] == 0x0102 and values["CAST"] == 0xFF
    assert values["SLICE"] == 1 and values["LOGIC"] is True and values["SHIFT"] == 0x0F
    assert values["NEG"] == -1 and values["BIG"] == 1 << 40 and values["ENUMV"] == 0xF0
    code = decl(prog, "Code")
    assert [evaluate(m.value) for m in code.members] == [3, 0xF0]
    assert code.members[0].enum is code


def test_constant_required_where_the_language_demands_one(tmp_path) -> None:
    text = BASIC.replace("        mark_to_drop(standard_metadata);",
                         "        bit<8> w = 4;\n        hdr.ipv4.ttl = hdr.ipv4.ttl[w:0];")
    with pytest.raises(CompileError) as info:
        load(tmp_path, text)
    assert "a slice bound must be a compile-time constant" in info.value.message


def test_struct_value_sets_typedef_externs_and_tuples(tmp_path) -> None:
    prog = load(tmp_path, MISC2)
    assert_fully_typed(prog)
    pvs_case = decl(prog, "P").states[0].transition.cases[0]
    assert isinstance(pvs_case.keyset[0].ref, ast.ValueSetDecl)
    assert pvs_case.keyset[0].type == T.ValueSetT(pvs_case.keyset[0].ref.element.type)
    assert pvs_case.keyset[0].ref.element.type.name == "pair_t"
    ing = decl(prog, "I")
    assert decl(ing, "r").type_ref.type == T.ExternT("register", (T.BitT(32),))
    tup, hdr_init, p, *_rest, last = ing.apply.stmts
    assert tup.type_ref.type == T.TupleT((T.BitT(8), T.BitT(16))) and tup.init.type == tup.type_ref.type
    assert hdr_init.rhs.type.name == "h_t"
    assert p.init.type.name == "pair_t" and p.init.target.ref is decl(prog, "mk")
    assert last.rhs.type == T.BitT(8)
    other = decl(prog, "other_t").annotation("structured").args[0]
    assert isinstance(other, ast.StructInitExpr) and [n for n, _ in other.fields] == ["k", "v"]
