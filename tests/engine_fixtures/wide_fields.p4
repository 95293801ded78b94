// Fields wider than 64 bits and varbit fields, for the differential test of the two
// switch engines (tests/test_native_wide.py): a 108-bit lookahead, 128-bit arithmetic,
// shifts and unsigned comparisons (values of 2**127 and more included), a signed
// 100-bit field, a saturating 72-bit add, exact/ternary/LPM/range tables keyed on 128
// (and 72) bits with 128- and 72-bit action parameters, a 128-bit register, a digest
// of wide fields, a CRC over wide fields, and two varbit fields extracted with
// run-time lengths, compared (as fields and as headers), copied whole (assign_VL,
// header copy) and emitted.
#include <core.p4>
#include <v1model.p4>

header wide_t {
    bit<8>   op;
    bit<128> a;
    bit<128> b;
    int<100> s;
    bit<4>   pad;
    bit<72>  c;
    bit<8>   n1;    // bytes of v1.v
    bit<8>   n2;    // bytes of v2.v
}

header vb_t {
    varbit<160> v;
}

header out_t {
    bit<128> sum;
    bit<128> diff;
    bit<128> prod;
    bit<128> shr;
    bit<128> shl;
    bit<128> neg;
    int<100> s2;
    bit<4>   pad;
    bit<72>  sat;
    bit<128> p128;
    bit<72>  p72;
    bit<128> old;   // the 128-bit register's cell before this packet
    bit<8>   ranged;  // the range table's parameter
    bit<32>  h;
    bit<8>   flags;
    bit<8>   hits;
}

struct headers {
    wide_t w;
    vb_t   v1;
    vb_t   v2;
    out_t  o;
}

struct learned_t {
    bit<128> a;
    int<100> s;
    bit<8>   op;
}

struct metadata {
    bit<128> key;
    bit<100> peek;   // the parser's look past the wide header's first byte
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        meta.peek = packet.lookahead<bit<108>>()[99:0];
        packet.extract(hdr.w);
        packet.extract(hdr.v1, (bit<32>)hdr.w.n1 * 8);
        packet.extract(hdr.v2, (bit<32>)hdr.w.n2 * 8);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<128>>(4) acc;
    action set_wide(bit<128> p) {
        hdr.o.p128 = p ^ hdr.w.a;
        hdr.o.hits = hdr.o.hits | 1;
    }
    action set_mid(bit<72> p) {
        hdr.o.p72 = p;
        hdr.o.hits = hdr.o.hits | 2;
    }
    action set_both(bit<128> p, bit<72> q) {
        hdr.o.p128 = hdr.o.p128 + p;
        hdr.o.p72 = hdr.o.p72 |+| q;
        hdr.o.hits = hdr.o.hits | 4;
    }
    action set_ranged(bit<8> x) {
        hdr.o.ranged = x;
    }
    table range_a {
        key = { hdr.w.a: range; hdr.w.c: range; }
        actions = { set_ranged; NoAction; }
        default_action = NoAction();
    }
    table exact_a {
        key = { hdr.w.a: exact; }
        actions = { set_wide; NoAction; }
        default_action = NoAction();
    }
    table ternary_b {
        key = { hdr.w.b: ternary; hdr.w.op: exact; }
        actions = { set_mid; NoAction; }
        default_action = NoAction();
    }
    table lpm_key {
        key = { meta.key: lpm; }
        actions = { set_both; NoAction; }
        default_action = NoAction();
    }
    apply {
        hdr.o.setValid();
        hdr.o.sum = hdr.w.a + hdr.w.b;
        hdr.o.diff = hdr.w.a - hdr.w.b;
        hdr.o.prod = hdr.w.a * hdr.w.b;
        hdr.o.shr = hdr.w.a >> hdr.w.op;
        hdr.o.shl = hdr.w.b << hdr.w.op;
        hdr.o.neg = ~hdr.w.a ^ (bit<128>)meta.peek;
        hdr.o.s2 = hdr.w.s * 3 - (int<100>)hdr.w.op;
        hdr.o.sat = hdr.w.c |+| (bit<72>)hdr.w.b;
        bit<8> f = 0;
        if (hdr.w.a < hdr.w.b) { f = f | 1; }
        if (hdr.w.a >= 128w0x80000000000000000000000000000000) { f = f | 2; }
        if (hdr.w.s < 0) { f = f | 4; }
        if (hdr.w.a == hdr.w.b) { f = f | 8; }
        if (hdr.v1.v == hdr.v2.v) { f = f | 16; }
        if (hdr.v1 == hdr.v2) { f = f | 64; }
        if ((hdr.w.b >> 120) > 0x7f) { f = f | 32; }
        hdr.o.flags = f;
        acc.read(hdr.o.old, (bit<32>)hdr.w.op[1:0]);
        acc.write((bit<32>)hdr.w.op[1:0], hdr.o.old + hdr.w.a);
        hash(hdr.o.h, HashAlgorithm.crc32, 32w0, { hdr.w.a, hdr.w.s, hdr.w.c, hdr.w.b }, 32w0xffffffff);
        meta.key = hdr.w.b;
        exact_a.apply();
        ternary_b.apply();
        lpm_key.apply();
        range_a.apply();
        if (hdr.w.op[0:0] == 1) {
            hdr.v2 = hdr.v1;
        } else if (hdr.w.op[1:1] == 1) {
            hdr.v1.v = hdr.v2.v;
        }
        if (hdr.w.op[2:2] == 1) {
            digest<learned_t>(1, { hdr.w.a, hdr.w.s, hdr.w.op });
        }
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.w);
        packet.emit(hdr.v1);
        packet.emit(hdr.v2);
        packet.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
