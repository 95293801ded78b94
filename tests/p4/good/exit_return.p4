// exit and return: return leaves only the current control (here a sub-control and an
// action-free apply path), exit ends ingress at once -- from an action too -- while
// egress still runs. A function with early returns computes a value.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
}

struct headers {
    h_t h;
}

struct metadata { }

bit<8> clamp10(in bit<8> x) {
    if (x > 10) {
        return 10;
    }
    return x;
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

control Sub(inout h_t h) {
    apply {
        h.b = 0x01;
        if (h.a == 1) {
            return;
        }
        h.b = 0x02;
    }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    Sub() sub;

    action stop() {
        hdr.h.c = 0xEE;
        exit;
    }
    table t {
        key = { hdr.h.a: exact; }
        actions = { stop; NoAction; }
        default_action = NoAction();
    }
    apply {
        standard_metadata.egress_spec = 1;
        sub.apply(hdr.h);
        t.apply();
        if (hdr.h.a == 2) {
            exit;
        }
        hdr.h.c = 0x33;
        hdr.h.d = clamp10(hdr.h.a);
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.h.e = 0x77;
    }
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
