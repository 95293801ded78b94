// Varbit fields assigned as a whole (BMv2's assign_VL primitive): in a parser state,
// in an action through a header stack element chosen at run time, and inside a whole
// header copy (assign_header). The copy takes the source's current length, so every
// deparsed copy is exactly as long as the data it came from.
#include <core.p4>
#include <v1model.p4>

header len_t {
    bit<8> n;    // bytes of data in hdr.a
    bit<8> i;    // which stack element receives a copy (none when >= 2)
}

header vb_t {
    bit<8>     tag;
    varbit<64> data;
}

struct headers {
    len_t   l;
    vb_t    a;
    vb_t    b;
    vb_t[2] s;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.l);
        packet.extract(hdr.a, (bit<32>)hdr.l.n * 8);
        hdr.b.setValid();
        hdr.b.data = hdr.a.data;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action copy_to_stack() {
        hdr.s[hdr.l.i].data = hdr.a.data;
    }
    apply {
        hdr.s[0].setValid();
        hdr.s[1].setValid();
        if (hdr.l.i < 2) {
            copy_to_stack();
        }
        if (hdr.l.n == 3) {
            hdr.b = hdr.a;
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
        packet.emit(hdr.l);
        packet.emit(hdr.a);
        packet.emit(hdr.b);
        packet.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
