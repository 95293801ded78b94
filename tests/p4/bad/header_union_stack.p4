// expect: 13:44: unsupported: a stack of header unions can only be indexed by a compile-time constant in a parser state
// A stack of header unions indexed at run time in a parser: p4sim keeps such a stack
// as one union per element (as p4c's mid end flattens it), and parser states cannot
// be unrolled over the elements as control statements are.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
header g_t { bit<16> b; }
header_union u_t { h_t h; g_t g; }
struct headers { h_t i; u_t[2] us; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.i); hdr.us[hdr.i.a].h.setValid(); transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
