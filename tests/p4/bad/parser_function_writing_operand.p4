// expect: 11:19: unsupported: a call to 'bump' (a function with if statements or an early return, and out or inout parameters) inside an expression is not supported in a parser state; call it as a statement
// Such a call as an operand could write what the expression read before it.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers { h_t h; }
struct metadata { }
bit<8> bump(inout bit<8> a) { if (a > 8) { a = 0; } return a; }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h);
        hdr.h.b = bump(hdr.h.a) + hdr.h.a;
        transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
