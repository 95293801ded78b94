// P4-16 width semantics on bit<W> and int<W>: wrap-around and saturating arithmetic,
// shifts (by more than the width too), slices as values and as l-values, concatenation,
// casts (truncation, zero and sign extension), negation, comparisons, ?:, constants.
#include <core.p4>
#include <v1model.p4>

const bit<8> K = 8w250 + 8w10;  // folds to 4 (wraps at 8 bits)

header in_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    int<8>  s;
    int<8>  t;
    bit<8>  n;
}

header out_t {
    bit<8>  add;
    bit<8>  sub;
    bit<8>  sat_add;
    bit<8>  sat_sub;
    int<8>  ssat_add;
    int<8>  ssat_sub;
    int<8>  wrap_sadd;
    bit<8>  mul;
    bit<8>  shl;
    bit<8>  shr;
    int<8>  sshr;
    bit<4>  hi;
    bit<4>  lo;
    bit<16> cat;
    bit<8>  narrow;
    bit<16> sext;
    bit<8>  neg;
    bit<8>  inv;
    bit<8>  flags;
    bit<8>  maxv;
    bit<8>  nib;
    bit<32> sq;
    bit<8>  k;
}

struct headers {
    in_t  i;
    out_t o;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.i);
        packet.extract(hdr.o);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.o.add = hdr.i.a + hdr.i.b;
        hdr.o.sub = hdr.i.a - hdr.i.b;
        hdr.o.sat_add = hdr.i.a |+| hdr.i.b;
        hdr.o.sat_sub = hdr.i.a |-| hdr.i.b;
        hdr.o.ssat_add = hdr.i.s |+| hdr.i.t;
        hdr.o.ssat_sub = hdr.i.s |-| hdr.i.t;
        hdr.o.wrap_sadd = hdr.i.s + hdr.i.t;
        hdr.o.mul = hdr.i.a * hdr.i.b;
        hdr.o.shl = hdr.i.a << hdr.i.n;
        hdr.o.shr = hdr.i.a >> hdr.i.n;
        hdr.o.sshr = hdr.i.s >> 2;
        hdr.o.hi = hdr.i.a[7:4];
        hdr.o.lo = hdr.i.b[3:0];
        hdr.o.cat = hdr.i.a ++ hdr.i.b;
        hdr.o.narrow = (bit<8>)hdr.i.c;
        hdr.o.sext = (bit<16>)(int<16>)hdr.i.s;
        hdr.o.neg = -hdr.i.a;
        hdr.o.inv = ~hdr.i.a;

        bit<8> f = 0;
        if (hdr.i.s < hdr.i.t) {
            f = f | 8w0x01;
        }
        if (hdr.i.a < hdr.i.b) {
            f = f | 8w0x02;
        }
        if ((int<8>)hdr.i.a < (int<8>)hdr.i.b) {
            f = f | 8w0x04;
        }
        if (hdr.i.a == hdr.i.b) {
            f = f | 8w0x08;
        }
        if (hdr.i.s >= 0) {
            f = f | 8w0x10;
        }
        hdr.o.flags = f;

        hdr.o.maxv = hdr.i.a > hdr.i.b ? hdr.i.a : hdr.i.b;
        hdr.o.nib[7:4] = hdr.i.c[11:8];
        hdr.o.nib[3:0] = hdr.i.c[15:12];
        hdr.o.sq = (bit<32>)hdr.i.c * (bit<32>)hdr.i.c;
        hdr.o.k = K;
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
        packet.emit(hdr.i);
        packet.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
