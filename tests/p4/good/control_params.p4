// Controls as values (P4-16 11.3, 15.1): a control and a sub-parser applied by their
// type names (Pipeline.apply(...), ExtractV.apply(...)), a control-typed constructor
// parameter (Twice(shared)) and one instance applied three times, twice through the
// parameter; its counter is shared.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> v;
}

struct headers {
    h_t h;
}

struct metadata { }

control bump_t(inout bit<8> x);

control Bump(inout bit<8> x) {
    counter(256, CounterType.packets) hits;
    apply {
        x = x + 1;
        hits.count((bit<32>)x);
    }
}

control Twice(inout bit<8> x)(bump_t b) {
    apply {
        b.apply(x);
        b.apply(x);
    }
}

control Pipeline(inout bit<8> x) {
    Bump() shared;
    Twice(shared) twice;
    apply {
        twice.apply(x);
        shared.apply(x);
    }
}

parser ExtractV(packet_in packet, out h_t h) {
    state start {
        packet.extract(h);
        transition accept;
    }
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        ExtractV.apply(packet, hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        Pipeline.apply(hdr.h.v);
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
