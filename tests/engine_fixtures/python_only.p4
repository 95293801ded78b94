// A program the C engine leaves to Python (docs/native-engine.md, "What runs only on
// Python"): a hash with the `random` algorithm, whose state is Python's `random`.
// tests/test_native_engine.py checks that `auto` falls back naming it, and that
// `--engine native` refuses with the same words.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> x;
}

struct headers { h_t h; }
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
    apply {
        hash(hdr.h.x, HashAlgorithm.random, 16w0, { hdr.h.x }, 16w0xffff);
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
