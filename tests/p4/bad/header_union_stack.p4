// expect: 10:35: unsupported: stack 'us': only stacks of headers are supported
// A stack of header unions (valid P4, not supported by p4sim's BMv2 back end).
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
header g_t { bit<16> b; }
header_union u_t { h_t h; g_t g; }
struct headers { u_t[2] us; }
struct metadata { }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.us[0].h); transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
