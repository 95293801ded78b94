// Corners of p4c's language that p4c accepts for BMv2: `type` as a parameter name
// (and read as a value), a select on no keys, a type as an annotation argument, a
// serializable enum as a header-stack index chosen at run time, and one table applied
// in both branches of an if (one node of the BMv2 pipeline: the same statements
// follow both applies).
#include <core.p4>
#include <v1model.p4>

@p4runtime_translation("example.org/ports", bit<32>)
type bit<9> port_t;

enum bit<8> Slot_t { A = 0, B = 1, C = 2 }

header in_t { bit<8> op; bit<8> idx; bit<8> v; }
header cell_t { bit<8> x; }

struct headers { in_t i; cell_t[3] cells; }
struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.i);
        transition select() {
            default: cells;
        }
    }
    state cells {
        packet.extract(hdr.cells.next);
        packet.extract(hdr.cells.next);
        packet.extract(hdr.cells.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action fwd(port_t type) {
        standard_metadata.egress_spec = (bit<9>)type;
    }
    table route {
        key = { hdr.i.op: exact; }
        actions = { fwd; }
        const entries = { 1 : fwd(2); 2 : fwd(3); }
        default_action = fwd(1);
    }
    apply {
        if (hdr.i.op == 1) {
            route.apply();
        } else {
            hdr.i.v = hdr.i.v + 1;
            route.apply();
        }
        Slot_t s = (Slot_t)hdr.i.idx;
        hdr.cells[s].x = hdr.i.v;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.i);
        packet.emit(hdr.cells);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
