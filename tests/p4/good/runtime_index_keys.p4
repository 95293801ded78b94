// A stack element chosen at run time in a table key and in a switch on a value, in
// an apply block. p4c moves such a key into a temporary computed before the table
// (SimplifyKey) and unrolls the element choice over the stack (HSIndexSimplifier):
// an index past the end writes nothing, so the temporary keeps its start value (0,
// metadata being zero at the start of a packet) instead of failing on a
// dereference. p4sim does the same for the key and for the switch's value, for a
// stack of headers and a stack of header unions.
#include <core.p4>
#include <v1model.p4>

header idx_t { bit<8> i; bit<8> j; }
header e_t { bit<8> x; }
header f_t { bit<8> y; }
header_union u_t { e_t e; f_t f; }
header out_t { bit<8> by_union; bit<8> by_switch; }

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

control I(inout headers hdr, inout metadata m, inout standard_metadata_t sm) {
    action port(bit<9> p) { sm.egress_spec = p; }
    action mark(bit<8> v) { hdr.o.by_union = v; }
    table by_stack {
        key = { hdr.s[hdr.idx.i].x : exact; }
        actions = { port; }
        default_action = port(3);
        const entries = { 0x11 : port(1); 0x22 : port(2); }
    }
    table by_union {
        key = { hdr.us[hdr.idx.j].f.y : exact; hdr.us[hdr.idx.j].f.isValid() : exact; }
        actions = { mark; NoAction; }
        default_action = mark(0xEE);
        const entries = { (0x44, true) : mark(0x44); }
    }
    apply {
        by_stack.apply();
        by_union.apply();
        switch (hdr.s[hdr.idx.j].x) {
            0x11: { hdr.o.by_switch = 1; }
            0x22: { hdr.o.by_switch = 2; }
            default: { hdr.o.by_switch = 0xDD; }
        }
    }
}

control E(inout headers hdr, inout metadata m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
