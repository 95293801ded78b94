// extract(u.next.m) on a stack of header unions (P4-16 8.18): each extraction fills
// the next element with the member named, a full stack stops the parser with
// StackOutOfBounds, and the next index starts at 0 for every packet.
#include <core.p4>
#include <v1model.p4>

header base_t {
    bit<8> count;   // how many elements follow
    bit<8> kinds;   // bit i set: element i is a short (16 bits), else a byte
}

header byte_t {
    bit<8> v;
}

header short_t {
    bit<16> v;
}

header_union u_t {
    byte_t b;
    short_t s;
}

struct headers {
    base_t base;
    u_t[2] u;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    bit<8> left;
    bit<8> kinds;
    state start {
        packet.extract(hdr.base);
        left = hdr.base.count;
        kinds = hdr.base.kinds;
        transition next;
    }
    state next {
        transition select(left, kinds[0:0]) {
            (0, _): accept;
            (_, 0): one_byte;
            (_, 1): one_short;
        }
    }
    state one_byte {
        packet.extract(hdr.u.next.b);
        left = left - 1;
        kinds = kinds >> 1;
        transition next;
    }
    state one_short {
        packet.extract(hdr.u.next.s);
        left = left - 1;
        kinds = kinds >> 1;
        transition next;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.parser_error == error.StackOutOfBounds) {
            hdr.base.kinds = 0xEE;
        }
        if (hdr.u[0].s.isValid()) {
            hdr.u[0].s.v = hdr.u[0].s.v + 1;
        }
        if (hdr.u[1].b.isValid()) {
            hdr.u[1].b.v = hdr.u[1].b.v + 1;
        }
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
        packet.emit(hdr.base);
        packet.emit(hdr.u);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
