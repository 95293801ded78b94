// `&&`, `||` and `?:` evaluate an operand with a call only when it decides the
// result (P4-16 8.5/8.6): the call's side effects (here: incrementing hdr.h.b through
// an inout parameter) must not happen otherwise, in an action and in an apply block.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

struct headers {
    h_t h;
}

struct metadata { }

bool bump(inout bit<8> v) {
    v = v + 1;
    return true;
}

bit<8> bump_twice(inout bit<8> v) {
    v = v + 1;
    return v + v;
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
    action and_chain() {
        bool t = hdr.h.a == 2 && bump(hdr.h.d);
        if (t) {
            hdr.h.c = 0xAA;
        }
    }
    apply {
        if (hdr.h.a == 1 || bump(hdr.h.b)) {
            hdr.h.c = hdr.h.a == 0 ? bump_twice(hdr.h.b) : 8w9;
        }
        and_chain();
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
