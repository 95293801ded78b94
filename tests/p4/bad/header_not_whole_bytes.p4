// expect: 6:8: unsupported: BMv2 supports only headers of whole bytes
// A header of 12 bits: p4c's BMv2 back end refuses headers whose fields do not add
// up to whole bytes (there is no padding in a header, unlike in metadata).
#include <core.p4>
#include <v1model.p4>
header odd_t { bit<4> a; bit<8> b; }
struct headers { odd_t o; }
struct meta_t { }
parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.o); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply {} }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { hdr.o.a = 1; } }
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout headers hdr, inout meta_t m) { apply {} }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.o); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
