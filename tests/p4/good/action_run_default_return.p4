// A switch on action_run whose default case returns: after an action the switch
// does not name, nothing else in the apply block runs (the table's next node for
// those actions is the end of the control, not the statement after the switch).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> k; bit<8> after; }
struct headers { h_t h; }
struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start { packet.extract(hdr.h); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action keep() { }
    action other() { }
    table t {
        key = { hdr.h.k: exact; }
        actions = { keep; other; NoAction; }
        const entries = { 1 : keep(); 2 : other(); }
        default_action = NoAction();
    }
    apply {
        standard_metadata.egress_spec = 1;
        switch (t.apply().action_run) {
            keep: { }
            default: { return; }
        }
        hdr.h.after = 0xEE;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) { apply { packet.emit(hdr.h); } }

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
