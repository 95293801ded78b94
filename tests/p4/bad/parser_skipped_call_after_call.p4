// expect: 14:52: unsupported: a call to 'big' (a function with if statements or an early return) that '&&', '||' or '?:' may skip, after a call to 'inc' in the same statement, is not supported in a parser state; assign that call's value to a variable first
// A call that '||' may skip to a function that needs states of its own, after a call
// in the same statement that writes what it reads (inc's inout): computing the
// operator first would run the two out of order.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers { h_t h; }
struct metadata { }
bit<8> inc(inout bit<8> x) { x = x + 1; return x; }
bool big(in bit<8> a) { if (a > 8) { return true; } return false; }
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(hdr.h);
        hdr.h.b = inc(hdr.h.a) + ((hdr.h.b == 0 || big(hdr.h.a)) ? 8w1 : 8w2);
        transition accept; }
}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers hdr, inout metadata m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
