// expect: 9:19: error: undefined name 'foo'
// Use of a name nothing declares.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; }
struct headers { h_t h; }
struct meta_t { bit<8> x; bit<16> y; }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply { m.x = foo; }
}
parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply {} }
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout headers hdr, inout meta_t m) { apply {} }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
