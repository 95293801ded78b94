// Header fields of struct type (P4-16 allows structs of bit-like fields in headers;
// p4c's FlattenHeaders makes them plain fields of the header in BMv2 JSON): a
// nested struct field read and written member by member, assigned whole from a
// metadata struct and from a list, used as a table key, compared whole, and a
// header stack element holding one, chosen at run time.
#include <core.p4>
#include <v1model.p4>

struct inner_t { bit<4> hi; bit<4> lo; }
struct pair_t { inner_t a; bit<8> b; }
type bit<8> tag_t;

header rec_t {
    bit<8> op;
    pair_t p;       // 16 bits: a.hi a.lo b
    tag_t tag;
}
header cell_t { inner_t c; }
header out_t { bit<8> hit; bit<8> same; }

struct headers { rec_t r; cell_t[2] cells; out_t o; }
struct metadata { pair_t saved; bit<1> i; }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.r);
        packet.extract(hdr.cells.next);
        packet.extract(hdr.cells.next);
        packet.extract(hdr.o);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action hit() { hdr.o.hit = 1; }
    table by_lo {
        key = { hdr.r.p.a.lo: exact; }
        actions = { hit; NoAction; }
        const entries = { 5 : hit(); }
        default_action = NoAction();
    }
    apply {
        standard_metadata.egress_spec = 1;
        meta.saved = hdr.r.p;                       // whole struct out of a header
        by_lo.apply();
        hdr.o.same = (hdr.r.p == meta.saved) ? 8w1 : 8w0;
        if (hdr.r.op == 1) {
            hdr.r.p.a.hi = hdr.r.p.a.lo;            // member by member
            hdr.r.p.b = hdr.r.p.b + 1;
        } else if (hdr.r.op == 2) {
            hdr.r.p = { { 4w0xA, 4w0xB }, 8w0xCC }; // a list into a header's struct
        } else if (hdr.r.op == 3) {
            meta.i = (bit<1>)hdr.r.p.b;             // run-time index into the stack
            hdr.cells[meta.i].c = hdr.r.p.a;
        }
        hdr.r.tag = (tag_t)(hdr.cells[0].c.hi ++ hdr.cells[1].c.lo);
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.r);
        packet.emit(hdr.cells);
        packet.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
