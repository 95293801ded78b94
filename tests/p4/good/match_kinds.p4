// Table match kinds: ternary with priorities, range, optional, exact+lpm, and a table
// with const entries (earlier entries win) and a const default action.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<32> addr;
    bit<8>  r1;
    bit<8>  r2;
    bit<8>  r3;
    bit<8>  r4;
    bit<8>  r5;
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

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action set_r1(bit<8> v) { hdr.h.r1 = v; }
    action set_r2(bit<8> v) { hdr.h.r2 = v; }
    action set_r3(bit<8> v) { hdr.h.r3 = v; }
    action set_r4(bit<8> v) { hdr.h.r4 = v; }
    action set_r5(bit<8> v) { hdr.h.r5 = v; }

    table t_tern {
        key = {
            hdr.h.a: ternary;
            hdr.h.b: exact;
        }
        actions = { set_r1; NoAction; }
        default_action = NoAction();
    }
    table t_range {
        key = { hdr.h.c: range; }
        actions = { set_r2; NoAction; }
        default_action = NoAction();
    }
    table t_opt {
        key = {
            hdr.h.a: optional;
            hdr.h.b: optional;
        }
        actions = { set_r3; NoAction; }
        default_action = NoAction();
    }
    table t_lpm {
        key = {
            hdr.h.b: exact;
            hdr.h.addr: lpm;
        }
        actions = { set_r4; NoAction; }
        default_action = NoAction();
    }
    table t_const {
        key = { hdr.h.a: ternary; }
        actions = { set_r5; }
        const default_action = set_r5(0xEE);
        const entries = {
            0x10 &&& 0xF0 : set_r5(1);
            0x12          : set_r5(2);
            0x20 &&& 0xF0 : set_r5(3);
        }
    }
    apply {
        standard_metadata.egress_spec = 1;
        t_tern.apply();
        t_range.apply();
        t_opt.apply();
        t_lpm.apply();
        t_const.apply();
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
