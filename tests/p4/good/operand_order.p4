// Operands are evaluated left to right (P4-16 8.1): an operand left of a call reads
// its value from before the call, even when the call writes it through an inout
// argument -- in a binary operation, a comparison, and the elements of a list
// expression (a control-local initializer and an assignment in an action).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> sum;
    bit<8> eq;
    bit<8> c;
    bit<8> d;
}

header pair_t {
    bit<8> x;
    bit<8> y;
}

struct headers {
    h_t h;
    pair_t p;
}

struct metadata { }

bit<8> bump(inout bit<8> v) {
    v = v + 10;
    return 1;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        packet.extract(hdr.p);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    pair_t saved = { hdr.h.c, bump(hdr.h.c) };
    action pair_up() {
        hdr.p = { hdr.h.d, bump(hdr.h.d) };
    }
    apply {
        hdr.h.sum = hdr.h.a + bump(hdr.h.a);
        hdr.h.eq = (hdr.h.b == bump(hdr.h.b)) ? 8w1 : 8w2;
        pair_up();
        hdr.p.x = hdr.p.x + saved.x;
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
        packet.emit(hdr.p);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
