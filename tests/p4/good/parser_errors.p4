// Parser errors in v1model: the packet still reaches ingress with parser_error set,
// headers extracted before the error stay valid, and the unparsed bytes (from the
// failed extract on) are kept as payload. PacketTooShort and StackOutOfBounds.
#include <core.p4>
#include <v1model.p4>

header a_t {
    bit<8> n;
    bit<8> code;
}

header e_t {
    bit<8> v;
}

header b_t {
    bit<32> big;
}

struct headers {
    a_t    a;
    e_t[2] s;
    b_t    b;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.a);
        transition select(hdr.a.n) {
            0: parse_b;
            default: parse_s;
        }
    }
    state parse_s {
        packet.extract(hdr.s.next);
        transition select(hdr.s.last.v) {
            0: accept;
            default: parse_s;
        }
    }
    state parse_b {
        packet.extract(hdr.b);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.parser_error == error.NoError) {
            hdr.a.code = 0;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.a.code = 1;
        } else if (standard_metadata.parser_error == error.StackOutOfBounds) {
            hdr.a.code = 2;
        } else {
            hdr.a.code = 3;
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
        packet.emit(hdr.a);
        packet.emit(hdr.s);
        packet.emit(hdr.b);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
