// Registers: read-modify-write of a bit<32> array indexed from the packet (the old
// value goes into the packet), an 8-bit register that wraps, and a register accessed
// from inside an action.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  idx;
    bit<32> add;
    bit<32> old;
    bit<8>  small;
}

struct headers {
    h_t h;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(8) acc;
    register<bit<8>>(1) tiny;

    action bump_tiny() {
        bit<8> v;
        tiny.read(v, 0);
        v = v + 10;
        tiny.write(0, v);
        hdr.h.small = v;
    }
    apply {
        bit<32> cur;
        acc.read(cur, (bit<32>)hdr.h.idx);
        hdr.h.old = cur;
        acc.write((bit<32>)hdr.h.idx, cur + hdr.h.add);
        bump_tiny();
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
        packet.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
