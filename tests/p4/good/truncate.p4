// truncate(): the packet leaves the switch cut to the given number of bytes
// (header changes included); shorter packets are not padded.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  kind;
    bit<8>  mark;
    bit<16> len;
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
        hdr.h.mark = 0xAB;
        hdr.h.len = (bit<16>)standard_metadata.packet_length;
        standard_metadata.egress_spec = 1;
        if (hdr.h.kind == 1) {
            truncate(32w6);
        }
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
