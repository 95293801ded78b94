// out/inout arguments are copied in when the call starts and out when it ends, in
// parameter order (P4-16 6.8): two parameters bound to one field do not see each
// other's writes, and a callee reading the field directly sees the caller's value.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
}

struct headers {
    h_t h;
}

struct metadata { }

bit<8> two_views(inout bit<8> x, out bit<8> y) {
    y = 7;
    x = x + 1;
    return x;
}

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
    action set_and_peek(inout bit<8> v) {
        v = 9;
        hdr.h.b = hdr.h.a;
    }
    apply {
        two_views(hdr.h.a, hdr.h.a);
        set_and_peek(hdr.h.a);
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
