// hash() with each deterministic v1model algorithm over the same field list, the
// base + (hash % max) reduction, and a field list that is not a whole number of bytes
// (BMv2 packs the fields bit by bit and pads the end with zeros).
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<16> x;
    bit<8>  y;
    bit<4>  z;
    bit<4>  w;
}

header out_t {
    bit<16> crc16;
    bit<32> crc32;
    bit<16> crc16c;
    bit<32> crc32c;
    bit<16> csum;
    bit<16> xor;
    bit<32> ident;
    bit<16> reduced;
    bit<16> odd_bits;
}

struct headers {
    in_t  i;
    out_t o;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.i);
        packet.extract(hdr.o);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hash(hdr.o.crc16, HashAlgorithm.crc16, 16w0,
             { hdr.i.x, hdr.i.y, hdr.i.z, hdr.i.w }, 32w65536);
        hash(hdr.o.crc32, HashAlgorithm.crc32, 32w0,
             { hdr.i.x, hdr.i.y, hdr.i.z, hdr.i.w }, 64w0x100000000);
        hash(hdr.o.crc16c, HashAlgorithm.crc16_custom, 16w0,
             { hdr.i.x, hdr.i.y, hdr.i.z, hdr.i.w }, 32w65536);
        hash(hdr.o.crc32c, HashAlgorithm.crc32_custom, 32w0,
             { hdr.i.x, hdr.i.y, hdr.i.z, hdr.i.w }, 64w0x100000000);
        hash(hdr.o.csum, HashAlgorithm.csum16, 16w0,
             { hdr.i.x, hdr.i.y, hdr.i.z, hdr.i.w }, 32w65536);
        hash(hdr.o.xor, HashAlgorithm.xor16, 16w0,
             { hdr.i.x, hdr.i.y, hdr.i.z, hdr.i.w }, 32w65536);
        hash(hdr.o.ident, HashAlgorithm.identity, 32w0,
             { hdr.i.x, hdr.i.y, hdr.i.z, hdr.i.w }, 64w0x100000000);
        hash(hdr.o.reduced, HashAlgorithm.crc32, 16w100,
             { hdr.i.x, hdr.i.y, hdr.i.z, hdr.i.w }, 16w7);
        hash(hdr.o.odd_bits, HashAlgorithm.crc16, 16w0,
             { hdr.i.y, hdr.i.z }, 32w65536);
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
        packet.emit(hdr.i);
        packet.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
