// Cloning: ingress-to-egress clones (of the packet as it arrived, re-parsed), with and
// without a preserved field list, a clone of a dropped packet, and an egress-to-egress
// clone (headers as egress left them). Egress stamps instance_type and metadata.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> kind;
    bit<8> itype;
    bit<8> mark;
    bit<8> kept;
    bit<8> lost;
}

struct headers {
    h_t h;
}

struct metadata {
    @field_list(1)
    bit<8> kept;
    bit<8> lost;
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
    apply {
        hdr.h.mark = 0xAA;
        meta.kept = 0x11;
        meta.lost = 0x22;
        standard_metadata.egress_spec = 1;
        if (hdr.h.kind == 1) {
            clone(CloneType.I2E, 32w5);
        } else if (hdr.h.kind == 2) {
            clone_preserving_field_list(CloneType.I2E, 32w5, 1);
        } else if (hdr.h.kind == 3) {
            mark_to_drop(standard_metadata);
            clone_preserving_field_list(CloneType.I2E, 32w5, 1);
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.h.itype = (bit<8>)standard_metadata.instance_type;
        hdr.h.kept = meta.kept;
        hdr.h.lost = meta.lost;
        if (hdr.h.kind == 4 && standard_metadata.instance_type == 0) {
            clone(CloneType.E2E, 32w6);
        }
    }
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
