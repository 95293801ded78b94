// expect: 13:31: unsupported: table 't' has a second lpm key: BMv2 supports at most one
// Two lpm keys in one table: BMv2 tables have at most one (p4c refuses).
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<16> c; }
struct headers { h_t h; }
struct meta_t { bit<8> x; bit<2> color; }
parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    table t {
        key = { hdr.h.a: lpm; hdr.h.b: lpm; }
        actions = { NoAction; }
    }
    apply { t.apply(); }
}
control VC(inout headers hdr, inout meta_t m) { apply {} }
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout headers hdr, inout meta_t m) { apply {} }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
