// if statements and early returns in functions called from parser states: BMv2
// parser states run their operations unconditionally, so the function is inlined
// into the state and each if splits the state (p4c's function inliner, then its
// parser control-flow pass); an early return goes to the state after the call.
// Each assignment runs only when its path is taken and no return came before it.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; }
struct headers { h_t h; }
struct metadata { }
bit<8> classify(in bit<8> x) {
    if (x == 0) {
        return 0x10;
    }
    if (x < 8) {
        return 0x20;
    } else {
        bit<8> y = x + 1;
        if (y == 0xff) { return 0x40; }
    }
    return 0x30;
}
void clamp(inout bit<8> v, in bit<8> hi) {
    if (v > hi) { v = hi; return; }
    v = v + 1;
}
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start {
        p.extract(hdr.h);
        hdr.h.b = classify(hdr.h.a);
        clamp(hdr.h.c, 0x20);
        transition accept;
    }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { s.egress_spec = 1; } }
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
