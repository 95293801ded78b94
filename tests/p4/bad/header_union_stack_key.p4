// expect: 15:30: unsupported: a stack of header unions can only be indexed by a compile-time constant outside an assignment, a call or an if condition
// A table key reading a stack of header unions at a run-time index: statements and
// if conditions in controls are unrolled over the elements (p4c's
// HSIndexSimplifier), a table key is not.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
header_union u_t { h_t h; h_t k; }
struct headers { h_t i; u_t[2] us; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.i); transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) {
    table t { key = { hdr.us[hdr.i.a].h.a : exact; } actions = { NoAction; } }
    apply { t.apply(); }
}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
