// A stack element chosen at run time as an out/inout argument of a function or an
// action. P4-16 (6.8) evaluates the argument once, at the call, and copies it in
// and back out; p4c writes those copies as assignments and unrolls them over the
// stack (HSIndexSimplifier), so an index past the end copies nothing in or back.
// p4sim does the same: the element is the one the index named when the call
// began, even if the callee changes the index, and past the end the stack is left
// as it was.
#include <core.p4>
#include <v1model.p4>

header idx_t { bit<8> i; }
header e_t { bit<8> x; }
struct headers { idx_t idx; e_t[2] s; }
struct metadata { }

parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t sm) {
    state start {
        p.extract(hdr.idx);
        p.extract(hdr.s[0]);
        p.extract(hdr.s[1]);
        transition accept;
    }
}

// adds 0x10 to v and moves the index on: the copy-out still goes to the element
// the index named at the call
void bump(inout bit<8> v, inout bit<8> i) {
    v = v + 0x10;
    i = i + 1;
}

control I(inout headers hdr, inout metadata m, inout standard_metadata_t sm) {
    // makes the header valid with x = 0x99: an out header argument
    action fill(out e_t e) {
        e.setValid();
        e.x = 0x99;
    }
    apply {
        bump(hdr.s[hdr.idx.i].x, hdr.idx.i);
        // the index moved on by one: fill the next element (if there is one)
        fill(hdr.s[hdr.idx.i]);
        sm.egress_spec = 1;
    }
}

control E(inout headers hdr, inout metadata m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
