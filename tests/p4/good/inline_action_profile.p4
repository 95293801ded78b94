// A table whose implementation is an action profile instantiated in the property
// itself (`implementation = action_profile(4)`): the profile is the table's own and
// carries the table's name, as p4c names it; entries point at its members.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> key;
    bit<8> port;
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

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.h.port = (bit<8>)port;
    }
    table pick {
        key = { hdr.h.key : exact; }
        actions = { set_port; }
        implementation = action_profile(4);
    }
    apply {
        standard_metadata.egress_spec = 7;
        pick.apply();
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
