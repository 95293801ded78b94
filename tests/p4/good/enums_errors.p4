// Serializable enums as header fields and select keys, plain enums as local state,
// program-defined errors raised with verify() and inspected through parser_error
// (in v1model the packet still reaches ingress after a parser error).
#include <core.p4>
#include <v1model.p4>

enum bit<8> Kind {
    A = 1,
    B = 2,
    C = 0x10
}

enum Color {
    Red,
    Green,
    Blue
}

error {
    BadKind,
    Reserved
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header t_t {
    Kind   k;
    bit<8> v;
    bit<8> res;
}

struct headers {
    ethernet_t eth;
    t_t        t;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.etherType) {
            0x88B5: parse_t;
            default: accept;
        }
    }
    state parse_t {
        packet.extract(hdr.t);
        verify(hdr.t.k != Kind.C, error.BadKind);
        verify(hdr.t.res == 0, error.Reserved);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        Color c = Color.Blue;
        if (standard_metadata.parser_error == error.BadKind) {
            hdr.t.v = 0xE1;
            c = Color.Red;
        } else if (standard_metadata.parser_error == error.Reserved) {
            hdr.t.v = 0xE2;
            c = Color.Red;
        } else if (standard_metadata.parser_error == error.NoError && hdr.t.isValid()) {
            hdr.t.res = (bit<8>)hdr.t.k + 8w1;
            if (hdr.t.k == Kind.A) {
                c = Color.Green;
            } else {
                hdr.t.k = Kind.C;
            }
        }
        if (c == Color.Red) {
            standard_metadata.egress_spec = 3;
        } else if (c == Color.Green) {
            standard_metadata.egress_spec = 1;
        } else {
            standard_metadata.egress_spec = 2;
        }
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
        packet.emit(hdr.eth);
        packet.emit(hdr.t);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
