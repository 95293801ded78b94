// A table's apply().hit / .miss where evaluation may not reach it: the right operand
// of && and ||, a branch of ?:. The table is applied only when evaluation gets there
// (P4-16 8.7, 8.4), so its action runs, and counts, only then.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> runs;
}

struct headers {
    h_t h;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    // every action bumps `runs` by a different amount: the output shows which tables ran
    action ran_t() { hdr.h.runs = hdr.h.runs + 0x01; }
    action ran_u() { hdr.h.runs = hdr.h.runs + 0x10; }
    action ran_w() { hdr.h.runs = hdr.h.runs + 0x40; }
    table t {
        key = { hdr.h.k : exact; }
        actions = { ran_t; }
        default_action = ran_t();
    }
    table u {
        key = { hdr.h.k : exact; }
        actions = { ran_u; }
        default_action = ran_u();
    }
    table w {
        key = { hdr.h.k : exact; }
        actions = { ran_w; }
        default_action = ran_w();
    }
    apply {
        bool first = hdr.h.a == 0 || t.apply().miss;
        if (first) {
            hdr.h.a = 0xaa;
        }
        hdr.h.b = (hdr.h.b != 0 && u.apply().hit) ? 8w1 : 8w2;
        hdr.h.c = hdr.h.c == 0 ? 8w0x33 : (w.apply().hit ? 8w0x44 : 8w0x55);
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
