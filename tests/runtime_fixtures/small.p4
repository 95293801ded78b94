/* Fixture of the P4Runtime server tests: a small v1model program touching every kind of
 * runtime object the server handles -- an LPM table with a direct counter, a
 * ternary/optional/range ACL with priorities, an action-selector table (ECMP), an
 * indexed counter, a meter, a register, a digest, a parser value set, multicast, I2E clone and
 * packet_in/packet_out controller headers. small.json and small.p4info.txtpb are its
 * BMv2 JSON and P4Info, written to match what p4c produces for it. */
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 64;

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
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
    bit<32> srcAddr;
    bit<32> dstAddr;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
}

struct learn_t {
    bit<48> srcAddr;
    bit<9>  ingress_port;
}

struct metadata_t {
    bit<16> group;
    bit<2>  color;
}

parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    value_set<bit<16>>(4) ipv4_types;

    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            ipv4_types: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(64, CounterType.packets_and_bytes) port_pkts;
    register<bit<32>>(64) last_src;
    meter(64, MeterType.packets) port_meter;
    direct_counter(CounterType.packets_and_bytes) lpm_hits;
    action_selector(HashAlgorithm.crc16, 32w64, 32w14) ecmp_sel;

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action set_nhop(bit<48> dmac, bit<9> port) {
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action set_mcast(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
    }
    action set_group(bit<16> group) {
        meta.group = group;
    }
    action send_to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }
    action mirror(bit<32> session) {
        clone(CloneType.I2E, session);
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { set_nhop; set_mcast; set_group; drop; }
        default_action = drop();
        counters = lpm_hits;
        size = 1024;
    }
    table acl {
        key = {
            hdr.ipv4.srcAddr: ternary;
            hdr.ipv4.protocol: optional;
            standard_metadata.ingress_port: range;
        }
        actions = { send_to_cpu; mirror; drop; NoAction; }
        default_action = NoAction();
        size = 256;
    }
    table ecmp {
        key = {
            meta.group: exact;
            hdr.ipv4.srcAddr: selector;
            hdr.ipv4.dstAddr: selector;
        }
        actions = { set_nhop; drop; }
        implementation = ecmp_sel;
        size = 64;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else if (hdr.ipv4.isValid()) {
            port_pkts.count((bit<32>)standard_metadata.ingress_port);
            last_src.write((bit<32>)standard_metadata.ingress_port, hdr.ipv4.srcAddr);
            port_meter.execute_meter((bit<32>)standard_metadata.ingress_port, meta.color);
            if (hdr.ipv4.ttl == 1) {
                digest<learn_t>(1, {hdr.ethernet.srcAddr, standard_metadata.ingress_port});
            }
            ipv4_lpm.apply();
            if (meta.group != 0) {
                ecmp.apply();
            }
            acl.apply();
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
        }
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
