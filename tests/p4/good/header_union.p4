// Header unions: a tag byte says which member of the union follows; ingress turns an
// `a` into a `b` and vice versa. Making one member valid invalidates the other, and
// the deparser emits only the valid member.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header tag_t {
    bit<8> kind;
}

header a_t {
    bit<8> x;
    bit<8> y;
}

header b_t {
    bit<16> z;
    bit<32> w;
}

header_union ab_t {
    a_t a;
    b_t b;
}

struct headers {
    ethernet_t eth;
    tag_t      tag;
    ab_t       u;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        packet.extract(hdr.tag);
        transition select(hdr.tag.kind) {
            1: parse_a;
            2: parse_b;
            default: accept;
        }
    }
    state parse_a {
        packet.extract(hdr.u.a);
        transition accept;
    }
    state parse_b {
        packet.extract(hdr.u.b);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.u.a.isValid()) {
            bit<16> xy = hdr.u.a.x ++ hdr.u.a.y;
            hdr.u.b.setValid();
            hdr.u.b.z = xy;
            hdr.u.b.w = 0xDEADBEEF;
            hdr.tag.kind = 2;
        } else if (hdr.u.b.isValid()) {
            bit<16> z = hdr.u.b.z;
            hdr.u.a.setValid();
            hdr.u.a.x = z[15:8];
            hdr.u.a.y = z[7:0];
            hdr.tag.kind = 1;
        }
        if (!hdr.u.isValid()) {
            hdr.tag.kind = 0xFF;
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
        packet.emit(hdr.tag);
        packet.emit(hdr.u);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
