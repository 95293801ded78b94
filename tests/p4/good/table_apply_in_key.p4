// A table key that applies another table (`sub.apply().hit`): the other table is
// applied first, its hit recorded in a temporary the key then reads (p4c's
// side-effect ordering does the same).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> k; bit<8> mark; bit<8> seen; }
struct headers { h_t h; }
struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start { packet.extract(hdr.h); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action note() { hdr.h.seen = 1; }
    table sub {
        key = { hdr.h.k: exact; }
        actions = { note; NoAction; }
        const entries = { 7 : note(); }
        default_action = NoAction();
    }
    action mark(bit<8> v) { hdr.h.mark = v; }
    table by_hit {
        key = { sub.apply().hit: exact @name("sub_hit"); }
        actions = { mark; NoAction; }
        const entries = { true : mark(0xAA); false : mark(0xBB); }
        default_action = NoAction();
    }
    apply {
        standard_metadata.egress_spec = 1;
        by_hit.apply();
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) { apply { packet.emit(hdr.h); } }

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
