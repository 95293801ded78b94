// expect: 10:31: error: the type argument of lookahead must be a fixed-width type
// lookahead of a header with a varbit field: its width is not known before parsing
// (p4c: "type argument must be a fixed-width type").
#include <core.p4>
#include <v1model.p4>
header v_t { bit<8> len; varbit<32> data; }
struct H { v_t v; }
parser P(packet_in pkt, out H h, inout standard_metadata_t sm) {
    state start {
        v_t x = pkt.lookahead<v_t>();
        transition accept;
    }
}
