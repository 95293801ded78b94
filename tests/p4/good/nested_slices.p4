// A slice of a slice is a slice of the base field (P4-16 8.5): as an l-value
// (f[7:4][1:0] = v writes bits 5..4 of f) and as an r-value, including a write through
// an out argument.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<8>  d;
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
    action put(out bit<2> dst, bit<2> v) {
        dst = v;
    }
    apply {
        hdr.h.a[7:4][1:0] = 2w0;
        hdr.h.b[7:0][6:1][5:2] = 4w0xA;
        hdr.h.d = (bit<8>)hdr.h.c[15:8][3:0][2:1];
        put(hdr.h.c[11:4][7:6], 2w1);
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
