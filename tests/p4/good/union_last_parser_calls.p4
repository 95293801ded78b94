// u.last of a stack of header unions in parser states that are also split for other
// reasons: as the argument of a function with an if (which is inlined into the state,
// see parser_function_calls), in a select key and in an assignment; as a sub-parser's
// argument; and of two stacks in one statement. A statement reading u.last is lowered
// once per element in its own state (the state is split on the next index); there it
// is a statement like any other, so the call is inlined and the sub-parser's states
// follow, per element, and a second stack's u.last splits that state again.
#include <core.p4>
#include <v1model.p4>

header base_t {
    bit<8> count;  // how many bytes each stack gets (1 or 2)
    bit<8> sum;    // set by the parser: u.last + w.last + plus1(count)
    bit<8> sel;    // set by the parser: which state the select on plus1(u.last) took
    bit<8> seen;   // set by the sub-parser: u.last's byte before it incremented it
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
    u_t[2] w;
}

struct metadata { }

// an if: inlined into the calling state, which it splits
bit<8> plus1(in bit<8> x) {
    if (x == 0xff) {
        return 0;
    }
    return x + 1;
}

parser Bump(packet_in packet, inout byte_t x, out bit<8> old) {
    state start {
        old = x.v;
        x.v = x.v + 1;
        transition accept;
    }
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    Bump() bump;
    state start {
        packet.extract(hdr.base);
        packet.extract(hdr.u.next.b);
        packet.extract(hdr.w.next.b);
        transition select(hdr.base.count) {
            2: second;
            default: last;
        }
    }
    state second {
        packet.extract(hdr.u.next.b);
        packet.extract(hdr.w.next.b);
        transition last;
    }
    state last {
        hdr.base.sum = hdr.u.last.b.v + hdr.w.last.b.v + plus1(hdr.base.count);
        bump.apply(packet, hdr.u.last.b, hdr.base.seen);
        transition select(plus1(hdr.u.last.b.v)) {
            0x13: low;
            0x23: high;
            default: accept;
        }
    }
    state low {
        hdr.base.sel = 0x0a;
        transition accept;
    }
    state high {
        hdr.base.sel = 0x0b;
        transition accept;
    }
}

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    apply { standard_metadata.egress_spec = 1; }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr); }
}

V1Switch(MyParser(), MyChecksum(), MyIngress(), MyEgress(), MyChecksum(), MyDeparser()) main;
