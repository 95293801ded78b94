// A table applied inside a larger condition: `a && t.apply().hit` applies t only when
// a holds, `a || t.apply().miss` only when a does not, and `!(...)` swaps the branches
// (P4-16 evaluates && and || left to right, skipping what cannot change the result).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> seen1;
    bit<8> seen2;
    bit<8> res;
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

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action mark1() { hdr.h.seen1 = hdr.h.seen1 + 1; }
    action mark2() { hdr.h.seen2 = hdr.h.seen2 + 1; }
    table t1 {
        key = { hdr.h.k: exact; }
        actions = { mark1; NoAction; }
        default_action = mark1();
    }
    table t2 {
        key = { hdr.h.k: exact; }
        actions = { mark2; NoAction; }
        default_action = mark2();
    }
    apply {
        if (hdr.h.k < 8 && t1.apply().hit) {
            hdr.h.res = hdr.h.res | 1;
        } else {
            hdr.h.res = hdr.h.res | 2;
        }
        if (!(hdr.h.k == 4 || t2.apply().miss)) {
            hdr.h.res = hdr.h.res | 4;
        }
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
