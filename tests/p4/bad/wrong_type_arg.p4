// expect: 10:24: error: argument 'value' of 'write': expected bit<8>, got bit<16>
// A register of bit<8> written with a bit<16> value.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; }
struct headers { h_t h; }
struct meta_t { bit<8> x; bit<16> y; }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<8>>(16) r;
    apply { r.write(0, m.y); }
}
parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply {} }
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout headers hdr, inout meta_t m) { apply {} }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
