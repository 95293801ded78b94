// if statements in parser states (P4-16 13.4: a state's body may hold any
// statement but switch): if/else-if chains that extract in one branch, set a local in
// another, a condition on a bool local set in an earlier state, and statements after
// the if that see what either branch did.
#include <core.p4>
#include <v1model.p4>

header a_t {
    bit<8> kind;
    bit<8> v;
}

header b_t {
    bit<8> data;
}

struct headers {
    a_t a;
    b_t b;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    bool seen_b = false;
    state start {
        packet.extract(hdr.a);
        bit<8> bonus = 0;
        if (hdr.a.kind == 1) {
            packet.extract(hdr.b);
            bonus = 0x10;
        } else if (hdr.a.kind == 2) {
            bonus = 0x20;
        } else {
            hdr.a.v = hdr.a.v + 1;
        }
        hdr.a.v = hdr.a.v + bonus;
        seen_b = hdr.b.isValid();
        transition mark;
    }
    state mark {
        if (seen_b) {
            hdr.a.kind = hdr.a.kind | 0x80;
        }
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply { standard_metadata.egress_spec = 1; }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
