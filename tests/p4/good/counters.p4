// Counters: an indexed packets_and_bytes counter in ingress, one in egress indexed by
// port, and a direct counter on a table. BMv2 counts the packet's length as received.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> idx;
    bit<8> grow;
}

header extra_t {
    bit<32> data;
}

struct headers {
    h_t     h;
    extra_t extra;
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
    counter(32w8, CounterType.packets_and_bytes) c;
    direct_counter(CounterType.packets_and_bytes) dc;

    action fwd(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    table t {
        key = { hdr.h.idx: exact; }
        actions = { fwd; NoAction; }
        counters = dc;
        default_action = NoAction();
    }
    apply {
        standard_metadata.egress_spec = 1;
        c.count((bit<32>)hdr.h.idx);
        t.apply();
        if (hdr.h.grow == 1) {
            hdr.extra.setValid();
            hdr.extra.data = 0x01020304;
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    counter(32w512, CounterType.packets_and_bytes) port_out;

    apply {
        port_out.count((bit<32>)standard_metadata.egress_port);
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.h);
        packet.emit(hdr.extra);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
