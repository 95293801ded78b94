// Indirect tables: an action profile (entries point at shared members) and an action
// selector (entries point at groups; BMv2 picks member number hash % group size, the
// members ordered by handle, hashing the selector key fields with crc16).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  dst;
    bit<16> flow;
    bit<8>  port_out;
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
    action_profile(32w8) prof;
    action_selector(HashAlgorithm.crc16, 32w16, 32w14) sel;

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.h.port_out = (bit<8>)port;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    table t_prof {
        key = { hdr.h.dst: exact; }
        actions = { set_port; drop; }
        implementation = prof;
    }
    table t_sel {
        key = {
            hdr.h.dst: exact;
            hdr.h.flow: selector;
        }
        actions = { set_port; drop; }
        implementation = sel;
    }
    apply {
        mark_to_drop(standard_metadata);
        if (!t_prof.apply().hit) {
            t_sel.apply();
        }
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
