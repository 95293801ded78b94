// A header-stack element chosen at run time in a parser state (p4c's
// HSIndexSimplifier leaves parsers alone, so the element is a dereference). An
// index past the end refers to no element: p4sim stops the parser with
// error.StackOutOfBounds ("Reference to invalid element of a header stack",
// core.p4) -- P4-16 leaves the access undefined, and BMv2 would index past its
// vector -- and v1model hands the packet to ingress with that parser_error.
#include <core.p4>
#include <v1model.p4>

header idx_t { bit<8> i; }
header e_t { bit<8> x; }
header tail_t { bit<8> t; }
struct headers { idx_t idx; e_t[2] s; tail_t tail; }
struct metadata { }

parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t sm) {
    state start {
        p.extract(hdr.idx);
        p.extract(hdr.s[0]);
        p.extract(hdr.s[1]);
        hdr.s[hdr.idx.i].x = hdr.s[hdr.idx.i].x + 1;
        transition select(hdr.s[hdr.idx.i].x) {
            0x12: with_tail;
            default: accept;
        }
    }
    state with_tail {
        p.extract(hdr.tail);
        transition accept;
    }
}

control I(inout headers hdr, inout metadata m, inout standard_metadata_t sm) {
    apply {
        if (sm.parser_error == error.StackOutOfBounds) {
            sm.egress_spec = 2;
        } else {
            sm.egress_spec = 1;
        }
    }
}

control E(inout headers hdr, inout metadata m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
