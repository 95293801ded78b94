// lookahead<T>() of a struct holding a header stack and a bit field, assigned to a
// local variable: every field comes from the bits ahead in declaration order and
// every header of it is valid; nothing is consumed (the packet is extracted after).
#include <core.p4>
#include <v1model.p4>

header item_t { bit<8> v; }
struct peek_t { item_t[2] items; bit<4> hi; bit<4> lo; }

header out_t { bit<8> first; bit<8> second; bit<8> nibbles; bit<8> valid; }
header rest_t { bit<24> bytes; }

struct headers { out_t o; rest_t r; }
struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        peek_t p = packet.lookahead<peek_t>();
        hdr.o.setValid();
        hdr.o.first = p.items[0].v;
        hdr.o.second = p.items[1].v;
        hdr.o.nibbles = p.lo ++ p.hi;
        hdr.o.valid = (p.items[0].isValid() && p.items[1].isValid()) ? 8w1 : 8w0;
        packet.extract(hdr.r);
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
    apply {
        packet.emit(hdr.o);
        packet.emit(hdr.r);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
