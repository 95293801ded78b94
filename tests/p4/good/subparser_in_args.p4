// A sub-parser's `in` arguments: a variable declared in the calling state before
// the call, and an expression (computed when the call is reached, P4-16 6.8), both
// used by the sub-parser for a value it writes to an inout argument.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> flag;
    bit<8> sum;
}

struct headers {
    h_t h;
}

struct metadata { }

parser Sub(packet_in packet, inout h_t x, in bool same, in bit<8> total) {
    state start {
        x.flag = same ? 8w1 : 8w2;
        x.sum = total;
        transition accept;
    }
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    Sub() sub;
    state start {
        packet.extract(hdr.h);
        bool equal = hdr.h.a == hdr.h.b;
        sub.apply(packet, hdr.h, equal, hdr.h.a + hdr.h.b);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
