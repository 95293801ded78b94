// expect: 11:13: unsupported: a for loop in a parser state must be unrolled (a BMv2 parser state cannot loop), but its bounds must be compile-time constants
// Inside an if, a parser state may hold a loop; with a bound known only at run time it cannot be unrolled.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> n; }
struct headers { h_t[4] h; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start {
        if (p.lookahead<bit<8>>() != 0) {
            for (bit<8> i = 0; i < p.lookahead<bit<8>>(); i = i + 1) { p.extract(hdr.h.next); }
        }
        transition accept;
    }
}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), E(), E(), C(), D()) main;
