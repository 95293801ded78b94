// expect: 18:14: unsupported: extern 'Summer' is not part of v1model
// A program's own extern with a generic method named like one of its controls
// (`update`): the method's type parameter is declared by the method, so the
// program is read as written and refused for the extern itself.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; }
struct headers { h_t h; }
struct meta_t { bit<8> x; bit<16> y; }
extern Summer {
    Summer();
    bit<16> update<T>(in T data);
}
parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    Summer() s; apply { hdr.h.b = s.update(hdr.h.a); }
}
control VC(inout headers hdr, inout meta_t m) { apply {} }
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control update(inout headers hdr, inout meta_t m) { apply {} }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), update(), D()) main;
