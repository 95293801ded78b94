// for loops (P4-16 1.2.4/1.2.5) in both forms: `for (init; cond; update)` with
// several declarations and updates, nested, with break and continue, in an action
// a table runs, in an apply block and in a function that returns from inside the
// loop; `for (T x in a..b)` including a range ending at the type's largest value
// (the loop must still end) and an empty range.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> n;
    bit<8> sum;
    bit<8> prod;
    bit<8> brk;
    bit<8> cont;
    bit<8> count;
    bit<8> x;
    bit<8> fpos;
    bit<8> meet;
}

struct headers {
    h_t h;
}

struct metadata { }

// position of the lowest set bit of v, 8 when none is set
bit<8> first_set(in bit<8> value) {
    bit<8> v = value;
    for (bit<8> i = 0; i < 8; i = i + 1) {
        if (v[0:0] == 1) {
            return i;
        }
        v = v >> 1;
    }
    return 8;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action loops() {
        hdr.h.sum = 0;
        for (bit<8> i = 1; i <= hdr.h.n; i = i + 1) {
            hdr.h.sum = hdr.h.sum + i;
        }
        hdr.h.prod = 0;
        for (bit<8> i = 0; i < hdr.h.n; i = i + 1) {
            for (bit<8> j = 0; j < hdr.h.n; j = j + 1) {
                hdr.h.prod = hdr.h.prod + 1;
            }
        }
        hdr.h.brk = 0;
        for (bit<8> i = 0; i < hdr.h.n; i = i + 1) {
            if (i == 3) {
                break;
            }
            hdr.h.brk = hdr.h.brk + 1;
        }
        hdr.h.cont = 0;
        for (bit<8> i = 0; i < 10; i = i + 1) {
            if ((i & 1) == 0) {
                continue;
            }
            hdr.h.cont = hdr.h.cont + i;
        }
    }
    table t {
        actions = { loops; }
        const default_action = loops();
    }
    apply {
        t.apply();
        for (bit<8> v in 250..255) {
            hdr.h.count = hdr.h.count + 1;
        }
        for (bit<8> v in 5..4) {
            hdr.h.x = 0xee;
        }
        hdr.h.fpos = first_set(hdr.h.x);
        for (bit<8> i = 0, bit<8> j = 10; i < j; i = i + 1, j = j - 1) {
            hdr.h.meet = j;
        }
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
