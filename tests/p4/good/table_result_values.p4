// A table's apply().hit / .miss used as a value inside a statement (an operand of ?:,
// a function argument, an initializer): the table is applied first -- its action runs
// before the statement -- and the statement reads the result, as p4c orders it.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers {
    h_t h;
}

struct metadata { }

bit<8> plus_one(in bit<8> v) {
    return v + 1;
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
    action set_c(bit<8> v) { hdr.h.c = v; }
    table t1 {
        key = { hdr.h.k: exact; }
        actions = { set_c; NoAction; }
        default_action = NoAction();
    }
    table t2 {
        key = { hdr.h.k: exact; }
        actions = { NoAction; }
    }
    apply {
        hdr.h.a = plus_one(t1.apply().hit ? hdr.h.c : 8w0x10);
        bool missed = t2.apply().miss;
        if (missed) {
            hdr.h.b = 0xEE;
        }
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
