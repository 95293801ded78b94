// A varbit local variable (P4-16 7.1.6.4) holds a value and its length: here it
// swaps the options of two headers of different lengths.
#include <core.p4>
#include <v1model.p4>

header opt_t {
    bit<8> len;           // bytes of data
    varbit<32> data;
}

struct headers {
    opt_t a;
    opt_t b;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.a, (bit<32>)packet.lookahead<bit<8>>() * 8);
        packet.extract(hdr.b, (bit<32>)packet.lookahead<bit<8>>() * 8);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    varbit<32> saved;
    apply {
        bit<8> saved_len = hdr.a.len;
        saved = hdr.a.data;
        hdr.a.data = hdr.b.data;
        hdr.a.len = hdr.b.len;
        hdr.b.data = saved;
        hdr.b.len = saved_len;
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.a);
        packet.emit(hdr.b);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
