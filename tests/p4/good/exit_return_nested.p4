// return and exit across nested blocks: return in a sub-control's apply leaves only the
// sub-control; exit in an action the sub-control calls ends the whole ingress; return
// in an action called from another action leaves only the inner one.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; }
struct headers { h_t h; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h); transition accept; }
}
control Sub(inout headers hdr) {
    action inner() { hdr.h.c = hdr.h.c + 1; if (hdr.h.a == 2) { exit; } hdr.h.c = hdr.h.c + 1; }
    apply {
        if (hdr.h.a == 1) { return; }
        inner();
        hdr.h.d = 0x44;
    }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) {
    Sub() sub;
    action inner2() { if (hdr.h.a == 3) { return; } hdr.h.b = 0x22; }
    action outer() { inner2(); hdr.h.e = 0x55; }
    apply {
        s.egress_spec = 1;
        outer();
        sub.apply(hdr);
        hdr.h.a = hdr.h.a + 0x10;
    }
}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
