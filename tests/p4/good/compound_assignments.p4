// Compound assignments (P4-16 1.2.5): `a op= b` means `a = a op b`, for every
// operator that has one, on fields, slices, locals and signed values; the
// target's width and signedness rule the result (wrap, saturate, arithmetic shift).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
    bit<8> g;
    bit<8> h;
    bit<8> i;
    bit<8> j;
    bit<8> k;
    bit<8> l;
    int<8> s;
    bit<8> acc;
}

struct headers {
    h_t h;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        hdr.h.acc += 1;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action accumulate(bit<8> v) {
        bit<8> t = v;
        t <<= 2;
        t -= 1;
        hdr.h.acc += t;
    }
    apply {
        hdr.h.a += 5;
        hdr.h.b -= 12;
        hdr.h.c *= 7;
        hdr.h.c[3:0] += 1;
        hdr.h.d /= 4;
        hdr.h.e %= 5;
        hdr.h.f <<= 3;
        hdr.h.g >>= 7;
        hdr.h.h &= 0x3c;
        hdr.h.i ^= 0xff;
        hdr.h.j |= 0x0f;
        hdr.h.k |+|= 10;
        hdr.h.l |-|= 9;
        hdr.h.s >>= 1;
        accumulate(hdr.h.a);
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
