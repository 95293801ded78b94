// exit inside an action called from another action that a table runs: the caller's
// remaining statements do not run, nor the switch block of the table's action_run.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; }
struct headers { h_t h; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h); transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) {
    action leave() { hdr.h.b = 1; exit; }
    action outer() { if (hdr.h.a == 1) { leave(); } hdr.h.c = 0x33; }
    table t { actions = { outer; } default_action = outer(); }
    apply {
        s.egress_spec = 1;
        switch (t.apply().action_run) { outer: { hdr.h.a = 0x77; } }
    }
}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
