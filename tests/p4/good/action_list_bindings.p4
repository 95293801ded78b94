// Actions with directional parameters bound in a table's action list (P4-16 14.2.1.2):
// the same action writes a different field in each table (out), reads a field when it
// starts (in), and a top-level action gets standard_metadata (inout) -- also as the
// default action. Only the directionless parameters are action data.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> x;
    bit<8> y;
    bit<8> z;
}

struct headers {
    h_t h;
}

struct metadata { }

action drop_it(inout standard_metadata_t sm) {
    mark_to_drop(sm);
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
    action set_byte(out bit<8> dst, bit<8> val) {
        dst = val;
    }
    action add_from(in bit<8> base, bit<8> delta) {
        hdr.h.x = 0;
        hdr.h.z = base + delta;
    }
    table t1 {
        key = { hdr.h.k: exact; }
        actions = { set_byte(hdr.h.x); NoAction; }
        default_action = NoAction();
    }
    table t2 {
        key = { hdr.h.k: exact; }
        actions = { set_byte(hdr.h.y); NoAction; }
        default_action = NoAction();
    }
    table t3 {
        key = { hdr.h.k: exact; }
        actions = { add_from(hdr.h.x); drop_it(standard_metadata); }
        default_action = drop_it(standard_metadata);
    }
    apply {
        standard_metadata.egress_spec = 1;
        t1.apply();
        t2.apply();
        t3.apply();
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
