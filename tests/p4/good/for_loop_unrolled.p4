// for loops BMv2 cannot run as loops, unrolled by the mid end (p4c's UnrollLoops):
// loops in an apply block that apply a sub-control or a table, with break and
// continue; a for-in over a range whose index is the control's argument; for-in over
// a header stack (in the apply block and in an action); a loop with break inside an
// `if` of a parser state. Each sub-control application in an iteration is inlined
// once per iteration; the table is applied by one iteration only (a condition on the
// index that the unrolled copies fold), since a BMv2 table appears once in a pipeline.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> n;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
}

header s_t {
    bit<8> v;
}

struct headers {
    h_t h;
    s_t[3] s;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        // up to three stack elements, stopping after one whose v is 0
        if (hdr.h.n != 0xff) {
            for (bit<8> k in 0..2) {
                packet.extract(hdr.s.next);
                if (hdr.s.last.v == 0) {
                    break;
                }
            }
        }
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control Add(inout bit<8> acc, in bit<8> by) {
    apply { acc = acc + by; }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    Add() add;

    action set_f(bit<8> v) { hdr.h.f = v; }

    action sum_stack() {
        for (s_t x in hdr.s) {
            if (x.isValid()) {
                hdr.h.e = hdr.h.e + x.v;
            }
        }
    }

    table t {
        key = { hdr.h.n: exact; }
        actions = { set_f; NoAction; }
        default_action = NoAction();
        const entries = { 4: set_f(0x44); }
    }

    apply {
        // a += 1 for i = 0, 1, 3, 4, 5; stop at i == n
        for (bit<8> i = 0; i < 6; i = i + 1) {
            if (i == hdr.h.n) {
                break;
            }
            if (i == 2) {
                continue;
            }
            add.apply(hdr.h.a, 1);
        }
        // b += 1 + 2 + 3
        for (bit<8> k in 1..3) {
            add.apply(hdr.h.b, k);
        }
        // c += 0 + 1 + 2; t applied in iteration 1 only
        for (bit<8> i = 0; i < 3; i = i + 1) {
            if (i == 1) {
                t.apply();
            }
            add.apply(hdr.h.c, i);
        }
        // d += v of each valid stack element
        for (s_t el in hdr.s) {
            if (el.isValid()) {
                add.apply(hdr.h.d, el.v);
            }
        }
        sum_stack();
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.h);
        packet.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
