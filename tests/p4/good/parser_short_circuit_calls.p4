// Calls to functions that need states of their own (an if, an early return) where
// '&&', '||' or '?:' may skip them, in a parser state and in a select key. P4-16
// (8.5, 8.6) runs such a call only when the operator evaluates it; its effect here
// (an extract, a counter) shows in the output. As p4c's side-effect ordering does,
// the operator is computed first by if statements (a || b: tmp = a; if (!tmp) tmp = b),
// whose branches split the state.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> kind;
    bit<8> res;
    bit<8> calls;
}

header opt_t {
    bit<8> v;
}

struct headers {
    h_t h;
    opt_t o1;
    opt_t o2;
}

struct metadata { }

// Extracts `o` when the next byte is not zero; true when it did.
bool grab(packet_in p, inout opt_t o, inout bit<8> calls) {
    calls = calls + 1;
    if (p.lookahead<bit<8>>() == 0) {
        return false;
    }
    p.extract(o);
    return true;
}

bit<8> low(in bit<8> k) {
    if (k < 0x10) {
        return k;
    }
    return 0x0f;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        hdr.h.calls = 0;
        // grab runs unless kind bit 0 is set
        hdr.h.res = ((hdr.h.kind & 1) == 1 || grab(packet, hdr.o1, hdr.h.calls)) ? 8w0xA0 : 8w0xB0;
        // low runs only when kind bit 1 is set; its value is added (after 08 if o1 is
        // valid: an isValid call before the operator does not stop it being computed first)
        hdr.h.res = hdr.h.res + (hdr.o1.isValid() ? 8w0x08 : 8w0) + ((hdr.h.kind & 2) == 2 ? low(hdr.h.kind) : 8w0);
        transition select(hdr.h.kind[2:2], (hdr.h.kind & 4) == 4 && grab(packet, hdr.o2, hdr.h.calls)) {
            (1, true): second;
            default: accept;
        }
    }
    state second {
        hdr.h.res = hdr.h.res | 0x01;
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
