// Arguments of a sub-parser call that share storage (a header and one of its
// fields): copy-in/copy-out (P4-16 6.8), as p4c's inliner does it for parsers
// (both arguments copied into fresh storage at the call, the written ones copied
// back in a state after the sub-parser's accept). So the sub-parser's writes through
// one argument do not show through the other before it returns, and a sub-parser
// that ends in reject never copies back: the caller keeps what it had.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
}

struct headers {
    h_t h;
    h_t g;
    h_t k;
}

struct metadata { }

parser Bump(packet_in packet, inout h_t x, in bit<8> v) {
    state start {
        x.a = v + 1;
        x.b = v;        // v is still the value h.a had at the call
        transition accept;
    }
}

parser Two(packet_in packet, inout bit<8> q, inout h_t r) {
    state start {
        r.b = q;
        q = 9;
        r.a = r.a + 1;  // r.a is still the value q had at the call
        transition accept;
    }
}

parser Fail(packet_in packet, inout h_t x, in bit<8> v) {
    state start {
        x.a = 0xee;     // written into the copy only
        transition select(v) {
            0: reject;
            default: accept;
        }
    }
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    Bump() bump;
    Two() two;
    Fail() fail;
    state start {
        packet.extract(hdr.h);
        packet.extract(hdr.g);
        packet.extract(hdr.k);
        bump.apply(packet, hdr.h, hdr.h.a);
        two.apply(packet, hdr.g.a, hdr.g);
        fail.apply(packet, hdr.k, hdr.k.b);
        hdr.h.b = hdr.h.b + 0x10;  // only after Fail accepts
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply { standard_metadata.egress_spec = 1; }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.h);
        packet.emit(hdr.g);
        packet.emit(hdr.k);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
