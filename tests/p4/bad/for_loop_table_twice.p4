// expect: 14:48: unsupported: table 'I.t' is applied more than once, with different statements after it
// Unrolled, the loop applies t in both iterations: as `t.apply(); t.apply();` (p4c: "requires a cycle").
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> n; }
struct headers { h_t h; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h); transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) {
    table t { actions = { NoAction; } }
    apply {
        for (bit<8> i = 0; i < 2; i = i + 1) { t.apply(); }
    }
}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
