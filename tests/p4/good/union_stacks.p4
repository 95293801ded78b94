// A stack of header unions (P4-16 8.20) at constant indexes: each element extracted
// as one member or the other, members tested and written, a union's validity, and
// the whole stack emitted in element order (valid members only).
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
header g_t { bit<16> b; }
header_union u_t { h_t h; g_t g; }
header k_t { bit<8> kind0; bit<8> kind1; }
struct headers { k_t k; u_t[2] us; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.k); transition select(hdr.k.kind0) { 1: h0; default: g0; } }
    state h0 { p.extract(hdr.us[0].h); transition second; }
    state g0 { p.extract(hdr.us[0].g); transition second; }
    state second { transition select(hdr.k.kind1) { 1: h1; default: g1; } }
    state h1 { p.extract(hdr.us[1].h); transition accept; }
    state g1 { p.extract(hdr.us[1].g); transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) {
    apply {
        s.egress_spec = 1;
        if (hdr.us[0].h.isValid()) { hdr.us[0].h.a = hdr.us[0].h.a + 1; }
        if (hdr.us[1].isValid() && hdr.us[1].g.isValid()) { hdr.us[1].h.setValid(); hdr.us[1].h.a = 0x77; }
    }
}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.k); p.emit(hdr.us); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
