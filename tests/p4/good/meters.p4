// Meters: an indirect meter array indexed from the packet and a direct meter on a
// table. Colors (0 green, 1 yellow, 2 red) are written into the packet.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> idx;
    bit<8> color;
    bit<8> dcolor;
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
    meter(32w4, MeterType.packets) m;
    direct_meter<bit<8>>(MeterType.packets) dm;

    action set_dcolor() {
        dm.read(hdr.h.dcolor);
    }
    table t {
        key = { hdr.h.idx: exact; }
        actions = { set_dcolor; NoAction; }
        meters = dm;
        default_action = NoAction();
    }
    apply {
        m.execute_meter((bit<32>)hdr.h.idx, hdr.h.color);
        t.apply();
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
