// digest(): MAC learning -- an unknown source MAC sends (srcAddr, ingress_port) to the
// control plane; destinations are forwarded by an exact-match table.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct learn_t {
    bit<48> srcAddr;
    bit<9>  ingress_port;
}

struct headers {
    ethernet_t eth;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action learn() {
        digest<learn_t>(1, { hdr.eth.srcAddr, standard_metadata.ingress_port });
    }
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    table smac {
        key = { hdr.eth.srcAddr: exact; }
        actions = { learn; NoAction; }
        default_action = learn();
    }
    table dmac {
        key = { hdr.eth.dstAddr: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply {
        smac.apply();
        dmac.apply();
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
        packet.emit(hdr.eth);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
