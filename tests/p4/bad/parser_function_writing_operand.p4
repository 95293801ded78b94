// expect: 13:21: unsupported: an argument that is not 'in', evaluated before a call to a function with if statements or an early return in the same statement, is not supported in a parser state (it would have to be copied first); compute that call first
// An inout argument evaluated before a call that needs parser states and writes the
// same field: the call runs before its statement, and the argument cannot be a copy.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers { h_t h; }
struct metadata { }
bit<8> g(inout bit<8> x, in bit<8> y) { x = x + y; return x; }
bit<8> bump(inout bit<8> a) { if (a > 8) { a = 0; } return a; }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h);
        hdr.h.b = g(hdr.h.a, bump(hdr.h.a));
        transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
