// An `out` parameter starts uninitialized (P4-16 6.8): a header passed as an `out`
// argument is invalid when the callee starts, so it stays invalid -- and is not
// emitted -- unless the callee makes it valid.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> v;
}

struct pair_t {
    h_t first;
    h_t second;
}

struct headers {
    h_t    a;
    h_t    b;
    pair_t p;
}

struct metadata { }

void leave_alone(out h_t h) { }

void fill(out h_t h, in bit<8> v) {
    h.setValid();
    h.v = v;
}

void fill_second(out pair_t p) {
    p.second.setValid();
    p.second.v = 0x55;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.a);
        packet.extract(hdr.b);
        packet.extract(hdr.p.first);
        packet.extract(hdr.p.second);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.a.v == 1) {
            leave_alone(hdr.a);
        }
        fill(hdr.b, hdr.b.v + 1);
        fill_second(hdr.p);
        standard_metadata.egress_spec = 1;
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
        packet.emit(hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
