// v1model's deprecated Checksum16 extern: get(data) is the 16-bit ones'-complement
// checksum of the data (BMv2's csum16 calculation), usable as a value.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> x;
    bit<16> y;
    bit<8> z;
    bit<8> pad;
    bit<16> sum;
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
    Checksum16() ck;
    apply {
        hdr.h.sum = ck.get({ hdr.h.x, hdr.h.y, hdr.h.z, hdr.h.pad });
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
