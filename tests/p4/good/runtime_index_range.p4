// Header-stack elements chosen at run time, in range and past the stack's end, as
// p4c's mid end (HSIndexSimplifier) lowers them: an out-of-range element is never
// written -- as an assignment target, as an action's inout argument, or assigned a
// list expression -- and a value read from one is undefined.
#include <core.p4>
#include <v1model.p4>

header idx_t {
    bit<8> w;      // element written by an assignment
    bit<8> c;      // element passed inout to an action
    bit<8> l;      // element assigned a list expression
    bit<8> r;      // element read
    bit<8> got;    // the value read
}

header e_t {
    bit<8> v;
}

struct headers {
    idx_t i;
    e_t[2] s;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.i);
        packet.extract(hdr.s.next);
        packet.extract(hdr.s.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action add_one(inout bit<8> x) {
        x = x + 1;
    }
    apply {
        hdr.s[hdr.i.w].v = hdr.s[hdr.i.w].v + 8w0x10;
        add_one(hdr.s[hdr.i.c].v);
        hdr.s[hdr.i.l] = { 8w0x77 };
        hdr.i.got = hdr.s[hdr.i.r].v;
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
        packet.emit(hdr.i);
        packet.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
