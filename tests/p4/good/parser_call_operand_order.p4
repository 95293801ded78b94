// P4's evaluation order (8.x: left to right, each call's effects before what follows
// it) with calls to functions that need parser states (an if, an early return),
// which run before their statement: as p4c's side-effect ordering does, what the
// statement evaluates before such a call is copied into a temporary first when the
// call may write it, or when that part itself calls something that writes.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> g;
}

struct headers { h_t h; }
struct metadata { }

// Needs states; writes its argument.
bit<8> bump(inout bit<8> x) {
    if (x > 8) {
        x = 0;
        return 0xF0;
    }
    x = x + 1;
    return x;
}

// No control flow; writes its argument.
bit<8> inc(inout bit<8> x) {
    x = x + 1;
    return x;
}

// Needs states; reads only.
bool big(in bit<8> v) {
    if (v > 8) {
        return true;
    }
    return false;
}

// Needs states; reads only.
bit<8> top(in bit<8> v) {
    if (v > 8) {
        return 0x80;
    }
    return v;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        // the call comes first: the read after it sees its write
        hdr.h.b = bump(hdr.h.a) + hdr.h.a;
        // the read comes first: copied before bump writes c
        hdr.h.d = hdr.h.c + bump(hdr.h.c);
        // inc writes g before top (inlined before the statement) reads it
        hdr.h.g = inc(hdr.h.g) + top(hdr.h.g);
        // inc writes e before the operator that may skip big, which reads e
        hdr.h.e = inc(hdr.h.e) + ((hdr.h.e == 0 || big(hdr.h.e)) ? 8w0x10 : 8w0x20);
        // the first key is read before the second key's call writes it
        transition select(hdr.h.a, bump(hdr.h.a)) {
            (6, 7): matched;
            default: accept;
        }
    }
    state matched {
        hdr.h.c = hdr.h.c | 0x80;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply { standard_metadata.egress_spec = 1; }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
