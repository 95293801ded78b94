// A header passed to a sub-control's `out` parameter starts invalid (P4-16 6.8):
// here the sub-control writes its inout header and leaves the out one alone, so the
// caller's extracted header is not emitted; a second out header it sets valid is.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
}

struct headers {
    h_t h;
    h_t g;
    h_t k;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        packet.extract(hdr.g);
        packet.extract(hdr.k);
        transition accept;
    }
}

control Sub(out h_t untouched, inout h_t bumped, out h_t made) {
    apply {
        bumped.a = bumped.a + 1;
        made.setValid();
        made.a = 0x66;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    Sub() sub;
    apply {
        standard_metadata.egress_spec = 1;
        sub.apply(hdr.h, hdr.g, hdr.k);
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
