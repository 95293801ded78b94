// exit in the middle of an action (P4-16 12.5): the rest of the action does not run
// (BMv2's exit primitive only marks the packet, so the compiler jumps to the action's
// end), the rest of the control does not run, the action's out/inout arguments are
// still copied out; also from inside a loop and from an action a table runs.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> n;
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
    action maybe_leave(inout bit<8> x) {
        x = 1;
        if (hdr.h.c == 0) {
            exit;
        }
        hdr.h.b = 2;
    }
    table t {
        actions = { maybe_leave(hdr.h.a); }
        default_action = maybe_leave(hdr.h.a);
    }
    action count_to(bit<8> limit) {
        for (bit<8> i = 0; i < 10; i = i + 1) {
            if (i == limit) {
                exit;
            }
            hdr.h.n = hdr.h.n + 1;
        }
        hdr.h.b = hdr.h.b + 0x10;
    }
    apply {
        standard_metadata.egress_spec = 1;
        t.apply();
        count_to(hdr.h.c);
        hdr.h.c = 9;
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
