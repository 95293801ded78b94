// Assigning a list expression to a header must evaluate the whole list first:
// hdr.p = { hdr.p.y, hdr.p.x } swaps x and y, and hdr.q = { 7, hdr.q.a, hdr.q.b }
// shifts q's bytes right by one (a constant first element is written first).
#include <core.p4>
#include <v1model.p4>

header p_t {
    bit<8> x;
    bit<8> y;
}

header q_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers {
    p_t p;
    q_t q;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.p);
        packet.extract(hdr.q);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.p = { hdr.p.y, hdr.p.x };
        hdr.q = { 8w7, hdr.q.a, hdr.q.b };
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
        packet.emit(hdr.p);
        packet.emit(hdr.q);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
