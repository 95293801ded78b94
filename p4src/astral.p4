/* astral.p4 -- one v1model program for every leaf and spine of the rail fabric.
 *
 * The role of a switch is chosen by its table entries, not by the program:
 *   - ipv4_lpm: a leaf maps its directly attached NICs (/32) to `forward`, and the rest
 *     to `ecmp_select`; a spine maps each rail/block subnet of its pod to `forward` (its
 *     leaf) and, in a three-tier fabric, the rest to `spine_ecmp_select` (up to the
 *     super-spines of its plane); a super-spine maps each pod's subnets to `forward`.
 *   - ecmp_nhop: (group, index) -> port. index = hash(salt, 5-tuple) % group size, so
 *     the controller and the host agents can predict the uplink of a flow off-switch.
 *     Leaves hash with ECMP_HASH_ALGO, spines with SPINE_HASH_ALGO, a different CRC:
 *     CRC is linear, so one CRC at both tiers, told apart only by the salt, would lock
 *     a spine's choice to its leaf's (polarization); two polynomials do not.
 *   - ecn_threshold: egress queue depth -> marking threshold out of 65536, filled by
 *     the controller from the DCQCN profile (Kmin, Kmax, Pmax).
 *   - switch_config: per-switch salt, switch id and the 1-in-N sampling rate.
 *   - sampled_port: the egress ports (fabric links) whose RoCE data packets are sampled.
 *   - arp_reply: a leaf answers ARP requests for its rail gateway address itself
 *     (proxy ARP), so hosts resolve their first hop without any other ARP speaker.
 *   - alarm_config: the three ECN alarm levels (marks within a window, per egress
 *     port) and the hold-off between two alarms of one port and level; all zero
 *     (the default) turns the alarms off.
 * Standard P4-16 that p4c accepts unchanged. The ECMP hash algorithms are chosen at
 * compile time (-DECMP_HASH_ALGO=crc16 -DSPINE_HASH_ALGO=crc32), as the fabric spec's
 * `ecmp_hash` says (topo/hashmodel.py: tier_algorithm).
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_IPV4 = 0x0800;
const bit<16> TYPE_ARP  = 0x0806;
const bit<8>  PROTO_ICMP = 1;
const bit<8>  PROTO_UDP  = 17;
const bit<16> ROCE_V2_PORT = 4791;
const bit<8>  BTH_OPCODE_CNP = 0x81;
const bit<32> CPU_CLONE_SESSION = 100;
/* standard_metadata.instance_type of an egress-to-egress clone (BMv2). */
const bit<32> INSTANCE_TYPE_EGRESS_CLONE = 2;
const bit<32> NUM_PORTS = 64;
/* The CPU port number is the switch's --cpu-port; 255 as in the P4 tutorials. */
#ifndef CPU_PORT
#define CPU_PORT 255
#endif
/* HashAlgorithm member used by ECMP; topo/hashmodel.py mirrors it bit for bit. */
#ifndef ECMP_HASH_ALGO
#define ECMP_HASH_ALGO crc32
#endif
/* The spines' HashAlgorithm (going up to the super-spines): not the leaves'. */
#ifndef SPINE_HASH_ALGO
#define SPINE_HASH_ALGO crc16
#endif
const bit<16> ARP_REQUEST = 1;
const bit<16> ARP_REPLY = 2;
/* Field list id preserved into the sampled clone (see clone_preserving_field_list). */
#define SAMPLE_FIELDS 1
/* The ECN alarms remember the timestamps of each egress port's last ALARM_RING marks
 * (a power of two: ring positions are a mark count & (ALARM_RING - 1)), so a level's
 * threshold is at most ALARM_RING marks. */
const bit<32> ALARM_RING = 64;
const bit<32> ALARM_RING_MASK = 63;
/* Alarm levels: 1 notice, 2 warning, 3 critical (controller/alarms.py: LEVELS). */
const bit<32> ALARM_LEVELS = 4;

typedef bit<9>  port_t;
typedef bit<48> mac_t;
typedef bit<32> ip4_t;

/* What goes to the controller: a 1-in-N sample (sampled = 1), an ECN alarm of the
 * egress port (alarm_level 1..3, with the level's mark count and the emulated time in
 * microseconds of the first of those marks), or both at once. The payload is the
 * packet's first bytes either way. */
@controller_header("packet_in")
header packet_in_t {
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<32> qdepth;
    bit<32> switch_id;
    bit<8>  sampled;
    bit<8>  alarm_level;
    bit<16> alarm_marks;
    bit<48> first_mark;
}

@controller_header("packet_out")
header packet_out_t {
    bit<16> egress_port;
}

header ethernet_t {
    mac_t   dstAddr;
    mac_t   srcAddr;
    bit<16> etherType;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    mac_t   sha;
    ip4_t   spa;
    mac_t   tha;
    ip4_t   tpa;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
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

header icmp_t {
    bit<8>  icmpType;
    bit<8>  code;
    bit<16> checksum;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

/* InfiniBand Base Transport Header as carried by RoCEv2. */
header bth_t {
    bit<8>  opcode;
    bit<1>  solicitedEvent;
    bit<1>  migReq;
    bit<2>  padCount;
    bit<4>  transportVersion;
    bit<16> partitionKey;
    bit<1>  fecn;
    bit<1>  becn;
    bit<6>  reserved1;
    bit<24> destQP;
    bit<1>  ackRequest;
    bit<7>  reserved2;
    bit<24> psn;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    arp_t        arp;
    ipv4_t       ipv4;
    icmp_t       icmp;
    udp_t        udp;
    bth_t        bth;
}

struct metadata_t {
    bit<16> ecmp_group;
    bit<16> ecmp_index;
    bit<32> salt;
    /* L4 ports fed to the ECMP hash: the UDP ports, 0 for other protocols (fields of
     * an invalid header are undefined, so the hash never reads them directly). */
    bit<16> l4_src;
    bit<16> l4_dst;
    @field_list(SAMPLE_FIELDS) bit<32> switch_id;
    bit<32> sample_rate;
    bit<16> mark_threshold;
    @field_list(SAMPLE_FIELDS) bit<16> ingress_port;
    /* Set in ingress for the 1-in-N packet; egress then clones it to the CPU port,
     * carrying the data port and its queue depth in the preserved fields. */
    @field_list(SAMPLE_FIELDS) bit<8> sample;
    @field_list(SAMPLE_FIELDS) bit<16> sampled_egress_port;
    @field_list(SAMPLE_FIELDS) bit<32> sampled_qdepth;
    /* An ECN alarm raised by this packet's mark (egress): the level, its mark count
     * and the time of the first of those marks; 0 = none. */
    @field_list(SAMPLE_FIELDS) bit<8>  alarm_level;
    @field_list(SAMPLE_FIELDS) bit<16> alarm_marks;
    @field_list(SAMPLE_FIELDS) bit<48> first_mark;
}

parser AstralParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
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
            TYPE_IPV4: parse_ipv4;
            TYPE_ARP: parse_arp;
            default: accept;
        }
    }
    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            PROTO_UDP: parse_udp;
            PROTO_ICMP: parse_icmp;
            default: accept;
        }
    }
    state parse_icmp {
        packet.extract(hdr.icmp);
        transition accept;
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            ROCE_V2_PORT: parse_bth;
            default: accept;
        }
    }
    state parse_bth {
        packet.extract(hdr.bth);
        transition accept;
    }
}

control AstralVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control AstralIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    counter(NUM_PORTS, CounterType.packets_and_bytes) rx_port_counter;
    counter(NUM_PORTS, CounterType.packets) no_route_counter;
    register<bit<32>>(1) sample_countdown;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_switch_config(bit<32> salt, bit<32> switch_id, bit<32> sample_rate) {
        meta.salt = salt;
        meta.switch_id = switch_id;
        meta.sample_rate = sample_rate;
    }

    /* Keyless: the controller sets the default action once per switch. */
    table switch_config {
        actions = { set_switch_config; }
        default_action = set_switch_config(0, 0, 0);
    }

    action forward(port_t port, mac_t dst_mac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action ecmp_select(bit<16> group, bit<16> size) {
        meta.ecmp_group = group;
        hash(meta.ecmp_index, HashAlgorithm.ECMP_HASH_ALGO, (bit<16>)0,
             { meta.salt, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol,
               meta.l4_src, meta.l4_dst },
             size);
    }

    action spine_ecmp_select(bit<16> group, bit<16> size) {
        meta.ecmp_group = group;
        hash(meta.ecmp_index, HashAlgorithm.SPINE_HASH_ALGO, (bit<16>)0,
             { meta.salt, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol,
               meta.l4_src, meta.l4_dst },
             size);
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { forward; ecmp_select; spine_ecmp_select; drop; }
        size = 1024;
        default_action = drop();
    }

    table ecmp_nhop {
        key = {
            meta.ecmp_group: exact;
            meta.ecmp_index: exact;
        }
        actions = { forward; drop; }
        size = 1024;
        default_action = drop();
    }

    action send_to_port(port_t port) {
        standard_metadata.egress_spec = port;
    }

    /* Turn an ARP request into the reply for `mac` and send it back where it came from. */
    action arp_answer(mac_t mac) {
        standard_metadata.egress_spec = standard_metadata.ingress_port;
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = mac;
        hdr.arp.oper = ARP_REPLY;
        hdr.arp.tha = hdr.arp.sha;
        hdr.arp.sha = mac;
        ip4_t asked = hdr.arp.tpa;
        hdr.arp.tpa = hdr.arp.spa;
        hdr.arp.spa = asked;
    }

    table arp_reply {
        key = { hdr.arp.tpa: exact; }
        actions = { arp_answer; drop; }
        size = 64;
        default_action = drop();
    }

    /* The ports whose RoCE data packets are sampled: the fabric links (a leaf's
     * uplinks, a spine's ports), where GOR looks for elephants. Packets delivered to a
     * NIC are left out: each PacketIn costs the controller and the switch. */
    table sampled_port {
        key = { standard_metadata.egress_spec: exact; }
        actions = { NoAction; }
        size = 64;
        default_action = NoAction();
    }

    apply {
        meta.ingress_port = (bit<16>)standard_metadata.ingress_port;
        if (hdr.packet_out.isValid()) {
            /* A controller-originated frame: send it out of the port it names. */
            send_to_port((port_t)hdr.packet_out.egress_port);
            hdr.packet_out.setInvalid();
            return;
        }
        if (hdr.arp.isValid() && hdr.arp.oper == ARP_REQUEST) {
            arp_reply.apply();
            return;
        }
        if (!hdr.ipv4.isValid()) {
            drop();
            return;
        }
        if (hdr.udp.isValid()) {
            meta.l4_src = hdr.udp.srcPort;
            meta.l4_dst = hdr.udp.dstPort;
        }
        rx_port_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.ipv4.ttl <= 1) {
            drop();
            return;
        }
        switch_config.apply();
        switch (ipv4_lpm.apply().action_run) {
            ecmp_select:
            spine_ecmp_select: { ecmp_nhop.apply(); }
            drop: { no_route_counter.count((bit<32>)standard_metadata.ingress_port); }
        }
        /* Trust DSCP, as RoCE fabrics do: the priority (egress queue, and the PFC
         * class) is the DSCP's class selector, its top three bits. RoCE data and
         * ACKs ride DSCP 26 -> priority 3 (lossless with PFC), CNPs DSCP 48 ->
         * priority 6, ahead of the data they throttle (topo/headers.py). */
        standard_metadata.priority = (bit<3>)(hdr.ipv4.dscp >> 3);
        /* sFlow-style 1-in-N sampling of the RoCE data packets leaving by a
         * sampled_port to the CPU port. As sFlow does (RFC 3176), the number of
         * packets skipped until the next sample is random (uniform in 1..2N-1, mean
         * N): a fixed countdown aliases with flows whose packets take turns -- two
         * flows interleaved on a leaf at N = 4 would have only one of them sampled. */
        if (hdr.bth.isValid() && hdr.bth.opcode != BTH_OPCODE_CNP && meta.sample_rate != 0) {
            if (sampled_port.apply().hit) {
                bit<32> left;
                sample_countdown.read(left, 0);
                if (left <= 1) {
                    bit<32> skip;
                    random(skip, 32w1, (meta.sample_rate << 1) - 1);
                    sample_countdown.write(0, skip);
                    meta.sample = 1;
                } else {
                    sample_countdown.write(0, left - 1);
                }
            }
        }
    }
}

control AstralEgress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    counter(NUM_PORTS, CounterType.packets_and_bytes) tx_port_counter;
    counter(NUM_PORTS, CounterType.packets) ecn_marked_counter;
    register<bit<32>>(NUM_PORTS) max_qdepth;
    /* ECN alarms: per egress port, how many packets it marked and the egress
     * timestamps of the last ALARM_RING of them (slot = count & ALARM_RING_MASK); per
     * port and level, when its last alarm went out (0: never). */
    register<bit<32>>(NUM_PORTS) mark_count;
    register<bit<48>>(NUM_PORTS * ALARM_RING) mark_ring;
    register<bit<48>>(NUM_PORTS * ALARM_LEVELS) alarm_sent;
    bit<8>  marks1 = 0;
    bit<8>  marks2 = 0;
    bit<8>  marks3 = 0;
    bit<32> window1 = 0;
    bit<32> window2 = 0;
    bit<32> window3 = 0;
    bit<32> holdoff = 0;

    action set_alarm_config(bit<8> notice_marks, bit<32> notice_window_us,
                            bit<8> warning_marks, bit<32> warning_window_us,
                            bit<8> critical_marks, bit<32> critical_window_us,
                            bit<32> holdoff_us) {
        marks1 = notice_marks;
        window1 = notice_window_us;
        marks2 = warning_marks;
        window2 = warning_window_us;
        marks3 = critical_marks;
        window3 = critical_window_us;
        holdoff = holdoff_us;
    }

    /* Keyless: the controller sets the default action (GOR, from its config). */
    table alarm_config {
        actions = { set_alarm_config; }
        default_action = set_alarm_config(0, 0, 0, 0, 0, 0, 0);
    }

    /* Level `level` is reached when the port's `marks`-th latest mark (this packet's
     * is the latest, number `count`) is at most `window` us old: a sliding window,
     * exact to the microsecond. Called for the levels in rising order, so the highest
     * reached wins. */
    action check_level(bit<8> level, bit<8> marks, bit<32> window, bit<32> port, bit<32> count,
                       bit<48> now) {
        bit<48> first;
        mark_ring.read(first, port * ALARM_RING + ((count - (bit<32>)marks + 1) & ALARM_RING_MASK));
        if (marks != 0 && count >= (bit<32>)marks && now - first <= (bit<48>)window) {
            meta.alarm_level = level;
            meta.alarm_marks = (bit<16>)marks;
            meta.first_mark = first;
        }
    }

    action set_mark_threshold(bit<16> threshold) {
        meta.mark_threshold = threshold;
    }

    /* Queue depth (packets) -> marking threshold in 1/65536: the DCQCN RED profile
     * (0 below Kmin, rising to Pmax at Kmax, 65535 above) written by the controller. */
    table ecn_threshold {
        key = { standard_metadata.enq_qdepth: range; }
        actions = { set_mark_threshold; NoAction; }
        size = 256;
        default_action = NoAction();
    }

    apply {
        if (standard_metadata.instance_type == INSTANCE_TYPE_EGRESS_CLONE) {
            /* The copy of a sampled packet on its way to the CPU port: describe the
             * original (its ports and the depth of the queue it went through). */
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = meta.ingress_port;
            hdr.packet_in.egress_port = meta.sampled_egress_port;
            hdr.packet_in.qdepth = meta.sampled_qdepth;
            hdr.packet_in.switch_id = meta.switch_id;
            hdr.packet_in.sampled = meta.sample;
            hdr.packet_in.alarm_level = meta.alarm_level;
            hdr.packet_in.alarm_marks = meta.alarm_marks;
            hdr.packet_in.first_mark = meta.first_mark;
            truncate(128);
            return;
        }
        bit<32> port = (bit<32>)standard_metadata.egress_port;
        tx_port_counter.count(port);
        bit<32> seen;
        max_qdepth.read(seen, port);
        if ((bit<32>)standard_metadata.enq_qdepth > seen) {
            max_qdepth.write(port, (bit<32>)standard_metadata.enq_qdepth);
        }
        if (hdr.ipv4.isValid() && hdr.ipv4.ecn != 0) {
            meta.mark_threshold = 0;
            ecn_threshold.apply();
            bit<16> draw;
            random(draw, 0, 65534);
            if (meta.mark_threshold != 0 && draw < meta.mark_threshold) {
                hdr.ipv4.ecn = 3;
                ecn_marked_counter.count(port);
                /* The mark's ECN alarm: remember its time, find the highest level
                 * the port's marks reach, and raise that level's alarm (the clone to
                 * the CPU port below) unless the port sent one of that level less
                 * than `holdoff` us ago -- a storm of marks is one alarm per hold-off. */
                alarm_config.apply();
                bit<48> now = standard_metadata.egress_global_timestamp;
                bit<32> count;
                mark_count.read(count, port);
                count = count + 1;
                mark_count.write(port, count);
                mark_ring.write(port * ALARM_RING + (count & ALARM_RING_MASK), now);
                check_level(1, marks1, window1, port, count, now);
                check_level(2, marks2, window2, port, count, now);
                check_level(3, marks3, window3, port, count, now);
                bit<48> sent;
                bit<32> slot = port * ALARM_LEVELS + (bit<32>)meta.alarm_level;
                alarm_sent.read(sent, slot);
                if (meta.alarm_level != 0 && sent != 0 && now - sent < (bit<48>)holdoff) {
                    meta.alarm_level = 0;
                }
                if (meta.alarm_level != 0) {
                    alarm_sent.write(slot, now);
                }
            }
        }
        if (meta.sample == 1 || meta.alarm_level != 0) {
            meta.sampled_egress_port = (bit<16>)standard_metadata.egress_port;
            meta.sampled_qdepth = (bit<32>)standard_metadata.enq_qdepth;
            clone_preserving_field_list(CloneType.E2E, CPU_CLONE_SESSION, SAMPLE_FIELDS);
        }
    }
}

control AstralComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control AstralDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.icmp);
        packet.emit(hdr.udp);
        packet.emit(hdr.bth);
    }
}

V1Switch(AstralParser(), AstralVerifyChecksum(), AstralIngress(), AstralEgress(),
         AstralComputeChecksum(), AstralDeparser()) main;
