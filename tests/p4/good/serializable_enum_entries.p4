// Serializable enum values as table keys in const entries, with masks (P4-16 14.2.1.4):
// a member, a member with a bit mask, a value cast to the enum with a mask, and a
// value of the enum's underlying type with a mask (p4c accepts that too).
#include <core.p4>
#include <v1model.p4>

enum bit<8> Kind {
    A = 1,
    B = 2,
    C = 0x10
}

header h_t {
    Kind k;
    bit<8> o;
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
    action set(bit<8> v) { hdr.h.o = v; }
    table t {
        key = { hdr.h.k : ternary; }
        actions = { set; }
        const entries = {
            Kind.A : set(1);
            Kind.C &&& 0xf0 : set(2);
            (Kind)8w2 &&& 8w0xff : set(3);
            ((bit<8>)Kind.B + 8w4) &&& 8w0xfe : set(4);
        }
    }
    apply {
        t.apply();
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
