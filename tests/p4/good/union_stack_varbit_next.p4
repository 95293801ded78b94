// extract(u.next.m, size) on a stack of header unions whose member has a varbit
// field (TCP-option style): the state is split on the stack's next index as for a
// one-argument extract, and the chosen element's member is extracted with its
// variable length (extract_VL).
#include <core.p4>
#include <v1model.p4>

header tag_t { bit<8> tag; }
header long_t { bit<8> kind; bit<8> len; varbit<32> data; }
header short_t { bit<8> kind; bit<8> val; }
header_union opt_u { long_t l; short_t s; }

struct headers { tag_t t; opt_u[2] opts; }
struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.t);
        transition next_option;
    }
    state next_option {
        transition select(packet.lookahead<bit<8>>()) {
            1: long_option;
            2: short_option;
            default: accept;
        }
    }
    state long_option {
        bit<16> kind_len = packet.lookahead<bit<16>>();
        packet.extract(hdr.opts.next.l, (bit<32>)kind_len[7:0] * 8);
        transition next_option;
    }
    state short_option {
        packet.extract(hdr.opts.next.s);
        transition next_option;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        hdr.t.tag = (hdr.opts[0].l.isValid() ? 8w0xA0 : 8w0xB0) | (hdr.opts[1].l.isValid() ? 8w0x0A : 8w0x0B);
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.t);
        packet.emit(hdr.opts);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
