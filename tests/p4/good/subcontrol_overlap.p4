// Arguments of a sub-control call that share storage (a header and one of its
// fields): copy-in/copy-out (P4-16 6.8) means the control's writes through one do
// not show through the other until it returns; the copies go back left to right.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
}

struct headers {
    h_t h;
    h_t g;
}

struct metadata { }

control Bump(inout h_t x, in bit<8> v) {
    apply {
        x.a = v + 1;
        x.b = v;        // v is still the value a had at the call
    }
}

control Two(inout bit<8> p, inout h_t q) {
    apply {
        q.b = p;
        p = 9;
        q.a = q.a + 1;  // q.a is still the value p had at the call
    }
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        packet.extract(hdr.g);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    Bump() bump;
    Two() two;
    apply {
        bump.apply(hdr.h, hdr.h.a);
        two.apply(hdr.g.a, hdr.g);
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
        packet.emit(hdr.h);
        packet.emit(hdr.g);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
