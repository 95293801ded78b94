// expect: 10:9: error: a for loop is not allowed in a parser state
// P4-16's parser statements have no for (p4c: a syntax error); inside an if it is a statement.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> n; }
struct headers { h_t[2] h; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start {
        for (bit<8> i in 0..1) { p.extract(hdr.h.next); }
        transition accept;
    }
}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), E(), E(), C(), D()) main;
