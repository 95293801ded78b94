// Const entries of a ternary table ordered by @priority(N) annotations, p4c's older
// form of entry priorities: the annotation is the entry's BMv2 priority as is (the
// lowest number wins); an entry without one keeps its position (1, 2, 3...).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> k;
    bit<8>  res;
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
    action mark(bit<8> v) {
        hdr.h.res = v;
    }
    table t {
        key = { hdr.h.k: ternary; }
        actions = { mark; NoAction; }
        default_action = NoAction();
        const entries = {
            0x0001 &&& 0x000F : mark(1) @priority(3);
            0x1201            : mark(2);
            0x1201 &&& 0xF00F : mark(3) @priority(1);
        }
    }
    apply {
        t.apply();
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
