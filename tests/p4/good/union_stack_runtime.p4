// A stack of header unions indexed at run time in a control (issue 14): statements
// in the apply block, in an action and in a function are unrolled over the
// elements, as p4c's HSIndexSimplifier makes the index constant before the unions
// are flattened; an index past the end writes nothing, and an if condition reading
// such an element takes the else branch.
#include <core.p4>
#include <v1model.p4>

header base_t {
    bit<8> count;   // how many elements follow
    bit<8> kinds;   // bit i set: element i is a short (16 bits), else a byte
    bit<8> op;      // what the ingress does (see the apply block)
    bit<8> i;       // index read
    bit<8> j;       // index written
    bit<8> res;     // set by the ingress: which member of u[i] is valid
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
    u_t[3] u;
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

// a function reaching the stack through its parameter
void bump(inout u_t[3] us, in bit<8> k) {
    us[k].b.v = us[k].b.v + 1;
}

// a value returned from an element chosen at run time
bit<8> short_hi(in u_t[3] us, in bit<8> k) {
    return us[k].s.v[15:8];
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    // an action whose index is its own parameter; making s valid makes b invalid
    action to_short(bit<8> k, bit<16> v) {
        hdr.u[k].s.setValid();
        hdr.u[k].s.v = v;
    }
    // a declaration and an if condition in an action (a switch statement is in the
    // apply block: p4c refuses one in an action for BMv2)
    action classify(bit<8> k) {
        bit<8> first = hdr.u[k].b.v;
        if (hdr.u[k].b.isValid()) {
            hdr.base.res = first;
        } else {
            hdr.base.res = short_hi(hdr.u, k);
        }
    }
    apply {
        if (hdr.u[hdr.base.i].b.isValid()) {
            hdr.base.res = 1;
        } else if (hdr.u[hdr.base.i].s.isValid()) {
            hdr.base.res = 2;
        } else {
            hdr.base.res = 3;
        }
        if (hdr.base.op == 1) {
            to_short(hdr.base.j, 0xBEEF);
        } else if (hdr.base.op == 2) {
            bump(hdr.u, hdr.base.j);
        } else if (hdr.base.op == 3) {
            hdr.u[hdr.base.j] = hdr.u[hdr.base.i];   // two run-time indexes
        } else if (hdr.base.op == 4) {
            hdr.u[hdr.base.j].s.setInvalid();
        } else if (hdr.base.op == 5) {
            classify(hdr.base.j);
            switch (hdr.u[hdr.base.j].s.v) {
                16w0x1122: { hdr.base.count = hdr.base.count | 0x80; }
                default: { }
            }
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
