// L2 forwarding with multicast groups: the replication engine copies the packet to
// every (rid, port) of the group; egress prunes the copy back to the ingress port and
// stamps egress_rid, instance_type and egress_port into the source MAC.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct metadata { }

struct headers {
    ethernet_t ethernet;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action set_mcast_grp(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
    }
    table l2 {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { forward; set_mcast_grp; drop; }
        size = 64;
        default_action = drop();
    }
    apply {
        l2.apply();
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == standard_metadata.ingress_port) {
            mark_to_drop(standard_metadata);
        } else {
            hdr.ethernet.srcAddr = (bit<48>)standard_metadata.egress_rid << 32
                                 | (bit<48>)standard_metadata.instance_type[7:0] << 24
                                 | (bit<48>)standard_metadata.egress_port;
        }
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
