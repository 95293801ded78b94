// Functions with if statements and early returns called from parser states, with
// what only a state split can do under a condition: an extract and a setValid.
// As p4c does it (function inlining, then its parser control-flow pass), the
// function's body is inlined into the state and its ifs split the state; an early
// return transitions to the state after the call (which does the copy-outs). A
// call inside an expression, a select key or a sub-parser's argument has its value
// computed first.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> kind;
    bit<8> len;
}

header opt_t {
    bit<8> v;
}

header tag_t {
    bit<8> t;
}

struct headers {
    h_t h;
    opt_t opt;
    tag_t tag;
}

struct metadata { }

bit<8> cls(in bit<8> k) {
    if (k < 2) {
        return k;
    }
    return 0x0f;
}

bit<8> take(packet_in p, inout headers hdr) {
    if (hdr.h.kind == 0) {
        return 0;
    }
    if (hdr.h.kind == 1) {
        p.extract(hdr.opt);
    } else {
        hdr.tag.setValid();
        hdr.tag.t = hdr.h.kind;
    }
    return hdr.h.len + 1;
}

void bump(inout bit<8> x) {
    if (x == 0xff) {
        return;
    }
    x = x + 1;
}

parser Mark(packet_in packet, inout h_t h, in bit<8> v) {
    state start {
        h.len = h.len ^ v;
        transition accept;
    }
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    Mark() mark;
    state start {
        packet.extract(hdr.h);
        hdr.h.len = take(packet, hdr);
        transition select(cls(hdr.h.kind)) {
            0x0f: more;
            default: accept;
        }
    }
    state more {
        hdr.h.kind = cls(hdr.h.len) + 0x10;
        bump(hdr.h.len);
        mark.apply(packet, hdr.h, cls(hdr.h.kind));
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
        packet.emit(hdr.h);
        packet.emit(hdr.opt);
        packet.emit(hdr.tag);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
