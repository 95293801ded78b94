// expect: 8:53: unsupported: only assignments may depend on a condition in a function called from a parser state
// A header made valid under a condition inside a function a parser state calls.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct headers { h_t h; h_t g; }
struct metadata { }
void mark(inout h_t g, in bit<8> a) { if (a == 1) { g.setValid(); } }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h); mark(hdr.g, hdr.h.a); transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
