// A stack element chosen at run time as a sub-control's argument. p4c inlines the
// control with copy-in/copy-out assignments of its arguments and then unrolls
// those over the stack (HSIndexSimplifier): an index past the end copies nothing
// in and nothing back, so the control runs on its parameter's start value and the
// stack is left as it was. p4sim copies such an argument the same way, for a stack
// of headers and a stack of header unions.
#include <core.p4>
#include <v1model.p4>

header idx_t { bit<8> i; bit<8> j; }
header e_t { bit<8> x; }
header f_t { bit<8> y; }
header_union u_t { e_t e; f_t f; }
header out_t { bit<8> seen; }

struct headers {
    idx_t idx;
    e_t[2] s;
    u_t[2] us;
    out_t o;
}
struct metadata { }

parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t sm) {
    state start {
        p.extract(hdr.idx);
        p.extract(hdr.s[0]);
        p.extract(hdr.s[1]);
        p.extract(hdr.us[0].e);
        p.extract(hdr.us[1].f);
        p.extract(hdr.o);
        transition accept;
    }
}

// adds 1 to x; reports what it saw (in) through seen
control Bump(inout e_t e, in bit<8> before, out bit<8> seen) {
    apply {
        seen = before;
        if (e.isValid()) {
            e.x = e.x + 1;
        }
    }
}

// makes the union hold f with y = 0x55 whatever it held
control ToF(inout u_t u) {
    apply {
        u.f.setValid();
        u.f.y = 0x55;
    }
}

control I(inout headers hdr, inout metadata m, inout standard_metadata_t sm) {
    Bump() bump;
    ToF() to_f;
    apply {
        bump.apply(hdr.s[hdr.idx.i], hdr.s[hdr.idx.i].x, hdr.o.seen);
        to_f.apply(hdr.us[hdr.idx.j]);
        sm.egress_spec = 1;
    }
}

control E(inout headers hdr, inout metadata m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
