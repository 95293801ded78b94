// `_` as the argument of an out parameter (P4-16 8.24): the value is discarded, the
// other arguments of the call are written as usual; in functions and actions.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers {
    h_t h;
}

struct metadata { }

void two(out bit<8> x, out bit<8> y) {
    x = 1;
    y = 2;
}

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
    action both(out bit<8> x, out bit<8> y, bit<8> v) {
        x = v;
        y = v + 1;
    }
    apply {
        two(hdr.h.a, _);
        two(_, hdr.h.b);
        both(_, hdr.h.c, 0x30);
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
