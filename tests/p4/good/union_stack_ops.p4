// push_front, pop_front and lastIndex on a stack of header unions in a control, and
// last in the parser (a statement and a select key) (issue 14). p4sim keeps the
// stack as one union per element, so the operations are per-element union copies
// (every member header, validity included) and a next index of its own; they
// behave as BMv2's P4-16 stacks: elements shift, vacated ones become invalid, the
// next index moves and saturates at the size and at 0.
#include <core.p4>
#include <v1model.p4>

header base_t {
    bit<8> count;   // how many elements follow
    bit<8> kinds;   // bit i set: element i is a short (16 bits), else a byte
    bit<8> op;      // what the ingress does (see the apply block)
    bit<8> n0;      // set by the ingress: nextIndex before the operation
    bit<8> n1;      // set by the ingress: nextIndex after it
    bit<16> lastv;  // set by the parser: the value of u.last's valid member
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
            (0, _): done;
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
    // last on an empty stack stops the parser with StackOutOfBounds (P4-16 8.18)
    state done {
        transition select(hdr.u.last.s.isValid()) {
            true: last_short;
            false: last_byte;
        }
    }
    state last_short {
        hdr.base.lastv = hdr.u.last.s.v;
        transition accept;
    }
    state last_byte {
        hdr.base.lastv = (bit<16>)hdr.u.last.b.v;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.parser_error == error.StackOutOfBounds) {
            hdr.base.kinds = 0xEE;
        }
        // lastIndex is nextIndex - 1 in bit<32>; + 1 gives nextIndex (0 for an empty stack)
        hdr.base.n0 = (bit<8>)(hdr.u.lastIndex + 1);
        if (hdr.base.op == 1) {
            hdr.u.push_front(1);
        } else if (hdr.base.op == 2) {
            hdr.u.pop_front(1);
        } else if (hdr.base.op == 3) {
            hdr.u.push_front(2);
        } else if (hdr.base.op == 4) {
            hdr.u.pop_front(2);
        } else if (hdr.base.op == 5) {
            hdr.u.push_front(1);
            hdr.u[0].s.setValid();
            hdr.u[0].s.v = 0xCAFE;
        } else if (hdr.base.op == 6) {
            u_t[3] saved = hdr.u;   // a copy of the stack, its next index included
            saved.pop_front(1);
            hdr.u.push_front(1);
            hdr.u = saved;          // back, with the copy's next index
        }
        hdr.base.n1 = (bit<8>)(hdr.u.lastIndex + 1);
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
