// expect: 14:9: unsupported: a for loop that applies a table or a control must be unrolled (BMv2 has loops only inside actions), but its bounds must be compile-time constants to unroll it
// A loop around a table, bounded only at run time: BMv2's control graph cannot loop.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> n; bit<8> sum; }
struct headers { h_t h; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h); transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) {
    table t { actions = { NoAction; } }
    apply {
        for (bit<8> i = 0; i < hdr.h.n; i = i + 1) {
            t.apply();
        }
    }
}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
