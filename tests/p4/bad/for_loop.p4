// expect: 13:9: unsupported: for loops (P4-16 1.2.4) are not supported
// A P4-16 1.2.4 for loop: named as unsupported, not as a syntax error.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> n; bit<8> sum; }
struct headers { h_t h; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h); transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) {
    action add_up() {
        for (bit<8> i = 0; i < hdr.h.n; i = i + 1) {
            hdr.h.sum = hdr.h.sum + i;
        }
    }
    apply { add_up(); }
}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
