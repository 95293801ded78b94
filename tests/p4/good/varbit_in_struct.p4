// Varbit fields in structs (P4-16 7.2.5: a struct field may have any type but a
// parser, control, package or extern). BMv2 keeps struct fields in metadata, whose
// fields have fixed widths; p4c's BMv2 back end gives each varbit field a metadata
// instance of its own holding the one variable-length field, and so does p4sim.
//
// Here: the metadata struct holds an option (length + varbit data); ingress saves
// option a there, copies b into a local struct and from it into a, then writes the
// saved option into b through an action's inout struct parameter -- so the value
// and its length travel through a metadata struct, a struct assignment, and a
// copy-in/copy-out. A struct comparison (== on structs with varbit fields compares
// the lengths and the values) decides the egress port.
#include <core.p4>
#include <v1model.p4>

header opt_t {
    bit<8> len;           // bytes of data
    varbit<32> data;
}

struct headers {
    opt_t a;
    opt_t b;
}

struct option_t {
    bit<8> len;
    varbit<32> data;
}

struct metadata {
    option_t saved;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.a, (bit<32>)packet.lookahead<bit<8>>() * 8);
        packet.extract(hdr.b, (bit<32>)packet.lookahead<bit<8>>() * 8);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    option_t staged;

    action put_back(inout option_t o) {
        hdr.b.len = o.len;
        hdr.b.data = o.data;
        o.len = 0;          // copied out: meta.saved.len becomes 0
    }

    apply {
        meta.saved.len = hdr.a.len;
        meta.saved.data = hdr.a.data;
        staged.len = hdr.b.len;
        staged.data = hdr.b.data;
        option_t copy = staged;          // struct assignment carries the varbit
        hdr.a.len = copy.len;
        hdr.a.data = copy.data;
        option_t before = meta.saved;
        put_back(meta.saved);
        // same options on both headers -> port 2, otherwise port 1
        if (before == copy) {
            standard_metadata.egress_spec = 2;
        } else {
            standard_metadata.egress_spec = 1;
        }
        if (meta.saved.len != 0) {
            mark_to_drop(standard_metadata);   // the copy-out did not happen
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.a);
        packet.emit(hdr.b);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
