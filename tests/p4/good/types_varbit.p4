// typedef and type (a new type needs explicit casts), a varbit header for IPv4
// options extracted with a run-time length, and a table given a global control-plane
// name with @name(".route").
#include <core.p4>
#include <v1model.p4>

typedef bit<48> mac_t;
type bit<32> ip4_t;

const ip4_t REWRITE_SRC = (ip4_t)32w0x0A0A0A0A;

header ethernet_t {
    mac_t   dst;
    mac_t   src;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    ip4_t   srcAddr;
    ip4_t   dstAddr;
}

header ipv4_opts_t {
    varbit<320> options;
}

struct headers {
    ethernet_t  eth;
    ipv4_t      ipv4;
    ipv4_opts_t opts;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl) {
            5: accept;
            default: parse_opts;
        }
    }
    state parse_opts {
        packet.extract(hdr.opts, ((bit<32>)hdr.ipv4.ihl - 5) * 32);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action set_out(mac_t dmac, bit<9> port) {
        hdr.eth.dst = dmac;
        standard_metadata.egress_spec = port;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    @name(".route")
    table route_table {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { set_out; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid()) {
            route_table.apply();
            hdr.ipv4.srcAddr = REWRITE_SRC;
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        } else {
            drop();
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
        packet.emit(hdr.eth);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.opts);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
