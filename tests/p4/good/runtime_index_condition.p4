// An if condition in an apply block reading a header-stack element chosen at run
// time: an index past the stack's end takes the else branch (p4c's HSIndexSimplifier
// writes the test per element, the else after them), it does not stop the packet.
#include <core.p4>
#include <v1model.p4>

header idx_t {
    bit<8> i;
    bit<8> verdict;
}

header e_t {
    bit<8> v;
}

struct headers {
    idx_t x;
    e_t[2] s;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.x);
        packet.extract(hdr.s.next);
        packet.extract(hdr.s.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.s[hdr.x.i].v == 8w7) {
            hdr.x.verdict = 1;
        } else {
            hdr.x.verdict = 2;
        }
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.x);
        packet.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
