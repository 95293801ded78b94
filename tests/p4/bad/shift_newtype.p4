// expect: 13:34: error: a shift amount must be an unsigned integer, not amount_t
// A shift amount of a 'type' (not a typedef) is not bit<S>.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<16> c; }
struct headers { h_t h; }
struct meta_t { bit<8> x; bit<2> color; }
type bit<8> amount_t;
parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply { hdr.h.b = hdr.h.b << (amount_t)hdr.h.a; }
}
control VC(inout headers hdr, inout meta_t m) { apply {} }
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout headers hdr, inout meta_t m) { apply {} }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
