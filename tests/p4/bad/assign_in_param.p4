// expect: 11:51: error: is an 'in' parameter and cannot be the target of an assignment
// Writing an 'in' parameter.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; }
struct headers { h_t h; }
struct meta_t { bit<8> x; bit<16> y; }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply { }
}
control D(packet_out p, in headers hdr) { apply { hdr.h.a = 1; } }
