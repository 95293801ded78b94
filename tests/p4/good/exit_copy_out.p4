// exit inside an action called from another action or from an apply block: the
// out/inout arguments of every call being left are still copied out (P4-16 12.5),
// innermost first, and nothing after the exit runs.
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
    action leave(inout bit<8> v) {
        v = 0x11;
        if (hdr.h.c == 0) {
            exit;
        }
        v = 0x22;
    }
    action outer(inout bit<8> w) {
        leave(w);
        w = w + 1;
        hdr.h.c = 0x33;
    }
    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.h.d == 0) {
            leave(hdr.h.a);
        }
        outer(hdr.h.b);
        hdr.h.c = hdr.h.c + 1;
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
