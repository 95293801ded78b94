// expect: 15:21: unsupported: table 't': entries on a table with an implementation (action profile or selector) are not supported: BMv2 accepts entries only in tables of type 'simple'
// Const entries on a table whose actions come from an action profile: BMv2's JSON
// loader refuses an `entries` attribute on a table that is not of type "simple".
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct headers { h_t h; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h); transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) {
    action set(bit<9> port) { s.egress_spec = port; }
    table t { key = { hdr.h.a : exact; } actions = { set; NoAction; }
        entries = { 1 : set(2); }
        implementation = action_profile(4); }
    apply { t.apply(); }
}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
