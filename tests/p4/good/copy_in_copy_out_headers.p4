// Header arguments of out/inout parameters are copied in when the call starts and
// out when it ends (P4-16 6.8), like scalars: an action that also reaches the header
// through the control's `hdr` sees the caller's value, two parameters bound to one
// header do not see each other's writes, a run-time stack index is evaluated once at
// the call, and an `out` header bound by a table's action list starts invalid only in
// the action's copy.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> v;
}

header idx_t {
    bit<8> i;
}

struct headers {
    h_t a;
    h_t b;
    h_t c;
    idx_t idx;
    h_t[2] s;
}

struct metadata { }

void twice(inout h_t x, inout h_t y) {
    x.v = 1;
    y.v = y.v + 1;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.a);
        packet.extract(hdr.b);
        packet.extract(hdr.c);
        packet.extract(hdr.idx);
        packet.extract(hdr.s.next);
        packet.extract(hdr.s.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action bump_and_peek(inout h_t x) {
        x.v = x.v + 1;
        hdr.b.v = hdr.a.v;
    }
    action move_index(inout h_t x) {
        hdr.idx.i = hdr.idx.i + 1;
        x.v = 0x99;
    }
    action fill(out h_t x) {
        hdr.c.v = hdr.a.isValid() ? hdr.a.v : 8w0xee;
        x.setValid();
        x.v = 0x77;
    }
    table t {
        actions = { fill(hdr.a); }
        default_action = fill(hdr.a);
    }
    apply {
        bump_and_peek(hdr.a);
        twice(hdr.b, hdr.b);
        move_index(hdr.s[hdr.idx.i]);
        t.apply();
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
