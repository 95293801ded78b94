// Header stack operations: the parser fills a stack with `next` (and records
// `lastIndex`); ingress applies push_front / pop_front / element copy / setInvalid as
// an op byte says, then counts the valid elements. The deparser emits the valid ones.
#include <core.p4>
#include <v1model.p4>

header ctl_t {
    bit<8> n;    // elements that follow; rewritten to the number of valid elements
    bit<8> op;
    bit<8> li;   // rewritten to the parser's last lastIndex
}

header elem_t {
    bit<8> v;
}

struct headers {
    ctl_t     ctl;
    elem_t[4] s;
}

struct metadata {
    bit<8>  remaining;
    bit<32> last_index;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ctl);
        meta.remaining = hdr.ctl.n;
        transition select(meta.remaining) {
            0: accept;
            default: parse_elem;
        }
    }
    state parse_elem {
        packet.extract(hdr.s.next);
        meta.last_index = hdr.s.lastIndex;
        meta.remaining = meta.remaining - 1;
        transition select(meta.remaining) {
            0: accept;
            default: parse_elem;
        }
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.ctl.op == 1) {
            hdr.s.push_front(2);
            hdr.s[0].setValid();
            hdr.s[0].v = 0xA0;
            hdr.s[1].setValid();
            hdr.s[1].v = 0xA1;
        } else if (hdr.ctl.op == 2) {
            hdr.s.pop_front(1);
        } else if (hdr.ctl.op == 3) {
            hdr.s[2] = hdr.s[0];
        } else if (hdr.ctl.op == 4) {
            hdr.s[1].setInvalid();
        } else if (hdr.ctl.op == 5) {
            hdr.s.push_front(1);
        }
        bit<8> count = 0;
        if (hdr.s[0].isValid()) { count = count + 1; }
        if (hdr.s[1].isValid()) { count = count + 1; }
        if (hdr.s[2].isValid()) { count = count + 1; }
        if (hdr.s[3].isValid()) { count = count + 1; }
        hdr.ctl.n = count;
        hdr.ctl.li = (bit<8>)meta.last_index;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ctl);
        packet.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
