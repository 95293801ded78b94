// Headers, header unions and structs passed to a sub-parser's out/inout parameters:
// an `out` header or union starts invalid (P4-16 6.8) even if the caller had
// extracted it, an `inout` header keeps its value, a struct's headers are reached
// through the parameter.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
}

header g_t {
    bit<8> b;
}

header_union u_t {
    h_t h;
    g_t g;
}

struct pair_t {
    h_t first;
    g_t second;
}

struct headers {
    h_t h;
    g_t g;
    u_t u;
    pair_t p;
}

struct metadata { }

parser Sub(packet_in packet, out h_t x, out u_t un, inout g_t y, inout pair_t pr) {
    state start {
        y.b = y.b + 1;
        packet.extract(un.h);
        packet.extract(pr.second);
        transition accept;
    }
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    Sub() sub;
    state start {
        packet.extract(hdr.h);
        packet.extract(hdr.g);
        packet.extract(hdr.u.g);
        packet.extract(hdr.p.first);
        sub.apply(packet, hdr.h, hdr.u, hdr.g, hdr.p);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply { standard_metadata.egress_spec = 1; }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
