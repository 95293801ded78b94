// `last` of a stack of header unions in an `if` condition of a parser state: the
// state is split on the stack's next index (one state per element, as for any
// statement reading `last`), and the if then splits each. A branch that extracts
// another element and reads `last` again sees the new element.
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> v; }
header b_t { bit<16> v; }
header_union u_t { a_t a; b_t b; }
header h_t { bit<8> n; bit<8> res; }

struct headers {
    h_t h;
    u_t[2] us;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        transition select(hdr.h.n) {
            0: empty;
            default: one;
        }
    }
    state one {
        packet.extract(hdr.us.next.a);
        if (hdr.us.last.a.isValid() && hdr.us.last.a.v == 7) {
            packet.extract(hdr.us.next.b);
            if (hdr.us.last.b.isValid()) {
                hdr.h.res = 0xB1;
            } else {
                hdr.h.res = 0xB0;
            }
        } else {
            hdr.h.res = hdr.us.last.a.v;
        }
        transition accept;
    }
    state empty {
        // nothing extracted: reading last fails with StackOutOfBounds
        if (hdr.us.last.a.isValid()) {
            hdr.h.res = 0xEE;
        }
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        if (standard_metadata.parser_error == error.StackOutOfBounds) {
            hdr.h.res = 0x5B;
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
