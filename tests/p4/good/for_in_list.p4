// for (T x in (list<T>) {a, b, ...}) (P4-16 1.2.5): x takes each element's value.
// As p4test does it, every element is evaluated once, in order, before the first
// iteration, so a body that changes what an element reads does not change the
// values (p4c's loop-var-in-list-elems-modified tests). Here in an apply block
// (with break and continue), in an action and in an if of a parser state.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  sum;
    bit<8>  m;
    bit<8>  cnt;
    bit<16> wide;
}

struct headers { h_t h; }
struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        if (hdr.h.a != 0) {
            for (bit<8> v in (list<bit<8>>) {3, 5}) {
                hdr.h.cnt = hdr.h.cnt + v;
            }
        }
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    bit<8> m;

    action widen() {
        for (bit<16> w in (list<bit<16>>) {0x100, 0x2000, (bit<16>)hdr.h.a}) {
            hdr.h.wide = hdr.h.wide + w;
        }
    }

    apply {
        standard_metadata.egress_spec = 1;
        hdr.h.sum = 0;
        m = 4;
        for (bit<8> i in (list<bit<8>>) {1, 2, m, hdr.h.a, 0x80}) {
            if (i == 2) {
                continue;
            }
            hdr.h.sum = hdr.h.sum + i;
            m = 100;
            if (hdr.h.sum > 0x40) {
                break;
            }
        }
        hdr.h.m = m;
        hdr.h.wide = 0;
        widen();
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
