// switch statements: on the action a table ran (action_run, with default covering
// misses) and on a value (with a shared case body and default); plus hit/miss.
#include <core.p4>
#include <v1model.p4>

header op_t {
    bit<8> op;
    bit<8> r1;
    bit<8> r2;
    bit<8> r3;
}

struct headers {
    op_t o;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.o);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action a1() {
        standard_metadata.egress_spec = 1;
    }
    action a2(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    table t {
        key = { hdr.o.op: exact; }
        actions = { a1; a2; NoAction; }
        default_action = NoAction();
    }
    table t2 {
        key = { hdr.o.op: exact; }
        actions = { NoAction; }
        default_action = NoAction();
    }
    apply {
        standard_metadata.egress_spec = 3;
        switch (t.apply().action_run) {
            a1: {
                hdr.o.r1 = 0x11;
            }
            a2: {
                hdr.o.r1 = 0x22;
            }
            default: {
                hdr.o.r1 = 0xDD;
            }
        }
        switch (hdr.o.op) {
            1: {
                hdr.o.r2 = 0x01;
            }
            2:
            3: {
                hdr.o.r2 = 0x23;
            }
            default: {
                hdr.o.r2 = 0xFF;
            }
        }
        if (t2.apply().miss) {
            hdr.o.r3 = 0x4D;
        } else {
            hdr.o.r3 = 0x48;
        }
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
        packet.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
