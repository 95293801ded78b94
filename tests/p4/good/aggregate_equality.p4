// == and != on headers (validity and every field), header stacks (element by
// element), structs holding a header, and invalid headers (two invalid headers are
// equal, a valid and an invalid one are not), as in P4-16 8.17 and BMv2's EQ_HEADER.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> f;
    bit<8> g;
}

header result_t {
    bit<8> flags;
}

struct pair_t {
    h_t    x;
    bit<8> y;
}

struct headers {
    h_t      a;
    h_t      b;
    h_t[2]   s;
    h_t[2]   t;
    result_t r;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.a);
        packet.extract(hdr.b);
        packet.extract(hdr.s.next);
        packet.extract(hdr.s.next);
        packet.extract(hdr.t.next);
        packet.extract(hdr.t.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        h_t u;
        h_t v;
        pair_t p1 = { hdr.a, 8w1 };
        pair_t p2 = { hdr.b, 8w1 };
        hdr.r.setValid();
        hdr.r.flags = 0;
        if (hdr.a == hdr.b) {
            hdr.r.flags[0:0] = 1;
        }
        if (hdr.a != hdr.b) {
            hdr.r.flags[1:1] = 1;
        }
        if (hdr.s == hdr.t) {
            hdr.r.flags[2:2] = 1;
        }
        if (p1 == p2) {
            hdr.r.flags[3:3] = 1;
        }
        if (u == v) {
            hdr.r.flags[4:4] = 1;
        }
        if (hdr.a == u) {
            hdr.r.flags[5:5] = 1;
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
        packet.emit(hdr.r);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
