// A compound assignment whose target has a call in an index: P4-16 (12.1) evaluates
// the target `a` of `a op= b` once. p4sim writes `a op= b` as `a = a op b`, so the
// index is first computed into a temporary (p4c's side-effect ordering does the
// same), and the call runs once.
//
// pick() counts its calls in hdr.c.calls and returns its argument: each
// `hdr.st[pick(..)].n op= v` must count one call and touch one element (evaluated
// twice, the counter would move by two, and a read/write pair could reach two
// different elements when the index depends on the counter).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> n; }
header c_t { bit<8> calls; }
struct headers { h_t h; h_t[2] st; c_t c; }
struct metadata { }

bit<1> pick(inout bit<8> calls, in bit<1> i) {
    calls = calls + 1;
    return i;
}

parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start {
        p.extract(hdr.h);
        p.extract(hdr.st[0]);
        p.extract(hdr.st[1]);
        p.extract(hdr.c);
        hdr.st[pick(hdr.c.calls, hdr.h.n[0:0])].n |= 0xF0;
        transition accept;
    }
}

control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) {
    apply {
        // the index is the counter's low bit before the call: 1 after the parser's call
        hdr.st[pick(hdr.c.calls, hdr.c.calls[0:0])].n += 5;
        // now the counter is 2: index 0
        hdr.st[pick(hdr.c.calls, hdr.c.calls[0:0])].n -= hdr.h.n;
        s.egress_spec = 1;
    }
}

control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
