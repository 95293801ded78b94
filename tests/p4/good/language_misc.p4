// Assorted language features: struct initializers and struct equality, bool
// metadata, a function with inout parameters and a return value, an action with an
// inout parameter called directly, an if inside an action, a table keyed on
// isValid(), header assignment from a list, and a header stack indexed at run time.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

header p_t {
    bit<8> x;
    bit<8> y;
}

header e_t {
    bit<8> v;
}

struct pair_t {
    bit<8> first;
    bit<8> second;
}

struct inner_t {
    pair_t p;
    bool   flag;
}

struct metadata {
    inner_t inner;
}

struct headers {
    h_t    h;
    p_t    p;
    e_t[3] s;
}

bit<8> sum_and_swap(inout bit<8> x, inout bit<8> y) {
    bit<8> t = x;
    x = y;
    y = t;
    return x + y;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        transition select(hdr.h.a) {
            0: accept;
            default: parse_p;
        }
    }
    state parse_p {
        packet.extract(hdr.p);
        packet.extract(hdr.s.next);
        packet.extract(hdr.s.next);
        packet.extract(hdr.s.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action bump(inout bit<8> v, bit<8> by) {
        v = v + by;
    }
    action cond_set(bit<8> lim) {
        if (hdr.h.b > lim) {
            hdr.h.d = 1;
        } else {
            hdr.h.d = 2;
        }
    }
    table t_valid {
        key = { hdr.p.isValid(): exact; }
        actions = { cond_set; NoAction; }
        default_action = NoAction();
    }
    apply {
        standard_metadata.egress_spec = 1;
        meta.inner.p = { hdr.h.a, hdr.h.b };
        meta.inner.flag = hdr.p.isValid();
        pair_t q = { hdr.h.b, hdr.h.a };
        if (meta.inner.p == q) {
            hdr.h.c = 0xEE;
        }
        bump(hdr.h.c, 5);
        t_valid.apply();

        bit<8> x = hdr.h.a;
        bit<8> y = hdr.h.b;
        bit<8> s = sum_and_swap(x, y);
        hdr.h.a = x;
        hdr.h.b = y;

        if (hdr.p.isValid()) {
            hdr.p = { hdr.p.y, 8w0x40 + (bit<8>)(bit<1>)meta.inner.flag };
            hdr.s[hdr.p.x & 1].v = 0xFF;
        } else {
            hdr.h.d = s;
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
        packet.emit(hdr.h);
        packet.emit(hdr.p);
        packet.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
