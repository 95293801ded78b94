// Resubmit (the original packet goes through ingress again) and recirculate (the
// deparsed output goes through ingress again), each keeping only the metadata in
// field list 1. Ingress tells the pass by instance_type (6 resubmit, 4 recirculate).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> kind;
    bit<8> itype;
    bit<8> rcount;
    bit<8> rother;
    bit<8> mark;
}

struct headers {
    h_t h;
}

struct metadata {
    @field_list(1)
    bit<8> count;
    bit<8> other;
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
        if (standard_metadata.instance_type == 0) {
            meta.count = 1;
            meta.other = 0x55;
            standard_metadata.egress_spec = 1;
            if (hdr.h.kind == 1) {
                resubmit_preserving_field_list(1);
            }
        } else {
            hdr.h.itype = (bit<8>)standard_metadata.instance_type;
            hdr.h.rcount = meta.count;
            hdr.h.rother = meta.other;
            if (standard_metadata.instance_type == 6) {
                standard_metadata.egress_spec = 2;
            } else {
                standard_metadata.egress_spec = 3;
            }
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        // instance_type is 0 again in egress (BMv2 marks every unicast packet NORMAL
        // when it leaves ingress), so the first pass is recognised by itype == 0.
        if (hdr.h.kind == 2 && hdr.h.itype == 0) {
            meta.count = 7;
            hdr.h.mark = 0xEE;
            recirculate_preserving_field_list(1);
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
