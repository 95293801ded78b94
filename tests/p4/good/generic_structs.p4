// Generic structs (P4-16 7.2.7): one declaration used with different type arguments
// in metadata, as a local, as a function parameter, and nested in another struct.
#include <core.p4>
#include <v1model.p4>

struct pair_t<T> {
    T first;
    T second;
}

struct tagged_t<T> {
    bit<8> tag;
    pair_t<T> values;
}

header h_t {
    bit<8> a;
    bit<8> b;
    bit<16> w;
    bit<8> sum8;
    bit<16> sum16;
    bit<8> tag;
}

struct headers {
    h_t h;
}

struct metadata {
    pair_t<bit<16>> wide;
    tagged_t<bit<8>> t;
}

bit<8> add8(in pair_t<bit<8>> p) {
    return p.first + p.second;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        pair_t<bit<8>> narrow = { hdr.h.a, hdr.h.b };
        hdr.h.sum8 = add8(narrow);
        meta.wide = { hdr.h.w, 16w0x0100 };
        hdr.h.sum16 = meta.wide.first + meta.wide.second;
        meta.t.tag = 0x5a;
        meta.t.values = narrow;
        hdr.h.tag = meta.t.tag ^ meta.t.values.second;
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
