// expect: 13:47: unsupported: a call to 'big' (with out, inout or extern arguments) inside '&&', '||' or '?:' that may skip a call to a function with if statements or an early return is not supported in a parser state unless the operator is the statement's whole value
// A call that '||' may skip to a function that needs states of its own and writes an
// inout argument, not the statement's whole value: computing the operator first would
// let the statement read what the call wrote (p4c copies such operands first).
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers { h_t h; }
struct metadata { }
bool big(in bit<8> a, inout bit<8> b) { if (a > 8) { b = 0; return true; } return false; }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h);
        hdr.h.b = hdr.h.b + ((hdr.h.a == 0 || big(hdr.h.a, hdr.h.b)) ? 8w1 : 8w2);
        transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
