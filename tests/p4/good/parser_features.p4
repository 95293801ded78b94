// Parser features: select with masks (&&&), ranges (..), don't-care (_) in tuples, a
// run-time value set, a sub-parser, lookahead of a bit<W> and advance (skipped bytes
// do not come out again). Ingress reports the path taken in an inserted header.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header res_t {
    bit<8> path;
    bit<8> peek;
}

header vlan_t {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> etherType;
}

header custom_t {
    bit<8> kind;
    bit<8> val;
}

struct headers {
    ethernet_t eth;
    res_t      res;
    vlan_t     vlan;
    custom_t   custom;
}

struct metadata {
    bit<8> path;
    bit<8> peek;
}

parser CustomParser(packet_in p, out custom_t c, inout metadata meta) {
    state start {
        p.extract(c);
        meta.path = meta.path | 0x10;
        transition accept;
    }
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    value_set<bit<16>>(4) custom_types;
    CustomParser() custom_parser;

    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.etherType) {
            0x8100 &&& 0xEFFF: parse_vlan;
            custom_types: parse_custom;
            0x0600 .. 0x06FF: parse_skip;
            default: accept;
        }
    }
    state parse_vlan {
        packet.extract(hdr.vlan);
        transition select(hdr.vlan.vid, hdr.vlan.pcp) {
            (12w0x010 &&& 12w0xFF0, _): vlan_low;
            (_, 7): vlan_prio;
            default: accept;
        }
    }
    state vlan_low {
        meta.path = 1;
        transition accept;
    }
    state vlan_prio {
        meta.path = 2;
        transition accept;
    }
    state parse_custom {
        meta.path = 3;
        custom_parser.apply(packet, hdr.custom, meta);
        transition accept;
    }
    state parse_skip {
        meta.peek = packet.lookahead<bit<8>>();
        packet.advance(16);
        meta.path = 4;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.res.setValid();
        hdr.res.path = meta.path;
        hdr.res.peek = meta.peek;
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
        packet.emit(hdr.eth);
        packet.emit(hdr.res);
        packet.emit(hdr.vlan);
        packet.emit(hdr.custom);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
