// expect: 15:13: unsupported: an entry value of type error for a table key is not supported on BMv2
// A table keyed on the parser error with const entries: p4c's bmv2 suite lists such
// programs (issue1062) as expected failures.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; }
struct headers { h_t h; }
struct meta_t { bit<8> x; bit<16> y; }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    action set(bit<8> v) { hdr.h.a = v; }
    table t {
        key = { sm.parser_error: exact; }
        actions = { set; }
        const entries = {
            error.NoError : set(1);
        }
    }
    apply { t.apply(); }
}
parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply {} }
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout headers hdr, inout meta_t m) { apply {} }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
