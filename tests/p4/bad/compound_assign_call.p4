// expect: 13:30: unsupported: compound assignment '+=' to a target that contains a call is not supported
// `a op= b` evaluates `a` once; p4sim writes it as `a = a op b`, so a target with a call is refused.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> n; }
struct headers { h_t h; h_t[2] st; }
struct metadata { }
bit<1> pick() { return 1; }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h); transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) {
    apply { hdr.st[pick()].n += 1; }
}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
