// random() used only in ways whose outcome is fixed: lo == hi gives lo, and a value
// drawn from [10, 20] is always inside that range.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  fixed8;
    bit<16> fixed16;
    bit<8>  in_range;
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
    apply {
        random(hdr.h.fixed8, 8w5, 8w5);
        random(hdr.h.fixed16, 16w1000, 16w1000);
        bit<8> r;
        random(r, 8w10, 8w20);
        if (r >= 10 && r <= 20) {
            hdr.h.in_range = 1;
        } else {
            hdr.h.in_range = 0;
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
