"""P4Info as p4c writes it: IDs, aliases, and the content of every object kind.

The golden IDs come from a P4Info that p4c generated for the P4 tutorials'
basic_tunnel exercise (public): IDs depend only on the fully qualified names, so our
own tunnel program that uses the same names must get exactly the same numbers.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from google.protobuf import text_format

from p4sim.compiler import CompileError, compile_file
from p4sim.compiler.p4info import IdAllocator, SuffixSet, jenkins_one_at_a_time
from p4sim.proto import p4i

PRELUDE = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
"""

TUNNEL = PRELUDE + """
header myTunnel_t { bit<16> proto_id; bit<16> dst_id; }
struct metadata { }
struct headers { ethernet_t ethernet; myTunnel_t myTunnel; ipv4_t ipv4; }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x1212: parse_tunnel; 0x800: parse_ipv4; default: accept; }
    }
    state parse_tunnel {
        packet.extract(hdr.myTunnel);
        transition select(hdr.myTunnel.proto_id) { 0x800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { packet.extract(hdr.ipv4); transition accept; }
}
control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    counter(65536, CounterType.packets_and_bytes) ingressTunnelCounter;
    counter(65536, CounterType.packets_and_bytes) egressTunnelCounter;
    action drop() { mark_to_drop(standard_metadata); }
    action ipv4_forward(bit<48> dstAddr, bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action myTunnel_ingress(bit<16> dst_id) {
        hdr.myTunnel.setValid();
        hdr.myTunnel.dst_id = dst_id;
        hdr.myTunnel.proto_id = hdr.ethernet.etherType;
        hdr.ethernet.etherType = 0x1212;
        ingressTunnelCounter.count((bit<32>) hdr.myTunnel.dst_id);
    }
    action myTunnel_forward(bit<9> port) { standard_metadata.egress_spec = port; }
    action myTunnel_egress(bit<48> dstAddr, bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ethernet.etherType = hdr.myTunnel.proto_id;
        hdr.myTunnel.setInvalid();
        egressTunnelCounter.count((bit<32>) hdr.myTunnel.dst_id);
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; myTunnel_ingress; drop; NoAction; }
        size = 1024;
        default_action = NoAction();
    }
    table myTunnel_exact {
        key = { hdr.myTunnel.dst_id: exact; }
        actions = { myTunnel_forward; myTunnel_egress; drop; }
        size = 1024;
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid() && !hdr.myTunnel.isValid()) { ipv4_lpm.apply(); }
        if (hdr.myTunnel.isValid()) { myTunnel_exact.apply(); }
    }
}
control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); packet.emit(hdr.myTunnel); packet.emit(hdr.ipv4); }
}
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
"""

# From the p4c-generated basic_tunnel.p4info.txt (P4 tutorials).
GOLDEN_IDS = {
    "MyIngress.ipv4_lpm": 37375156,
    "MyIngress.myTunnel_exact": 35862311,
    "NoAction": 21257015,
    "MyIngress.drop": 25652968,
    "MyIngress.ipv4_forward": 28792405,
    "MyIngress.myTunnel_ingress": 24181246,
    "MyIngress.myTunnel_forward": 27454791,
    "MyIngress.myTunnel_egress": 33029817,
    "MyIngress.ingressTunnelCounter": 315557958,
    "MyIngress.egressTunnelCounter": 312374841,
}


def compile_src(tmp_path: Path, src: str, name: str = "prog.p4"):
    path = tmp_path / name
    path.write_text(src)
    return compile_file(str(path))


def all_preambles(info: p4i.P4Info) -> dict[str, p4i.Preamble]:
    out = {}
    for kind in ("tables", "actions", "action_profiles", "counters", "direct_counters", "meters",
                 "direct_meters", "registers", "digests", "value_sets", "controller_packet_metadata"):
        for obj in getattr(info, kind):
            out[obj.preamble.name] = obj.preamble
    return out


def test_ids_equal_p4c_for_the_same_names(tmp_path):
    info = compile_src(tmp_path, TUNNEL).p4info
    pre = all_preambles(info)
    assert {name: pre[name].id for name in GOLDEN_IDS} == GOLDEN_IDS
    assert info.pkg_info.arch == "v1model"


def test_tunnel_p4info_content(tmp_path):
    info = compile_src(tmp_path, TUNNEL).p4info
    lpm, exact = info.tables
    assert lpm.preamble.alias == "ipv4_lpm"
    assert [(f.id, f.name, f.bitwidth, f.match_type) for f in lpm.match_fields] == [
        (1, "hdr.ipv4.dstAddr", 32, p4i.MatchField.LPM)]
    assert [r.id for r in lpm.action_refs] == [28792405, 24181246, 25652968, 21257015]
    assert lpm.size == 1024 and not lpm.const_default_action_id
    assert [(f.name, f.match_type) for f in exact.match_fields] == [("hdr.myTunnel.dst_id", p4i.MatchField.EXACT)]
    # declaration order, NoAction (core.p4) first, params numbered from 1
    assert [a.preamble.name for a in info.actions] == [
        "NoAction", "MyIngress.drop", "MyIngress.ipv4_forward", "MyIngress.myTunnel_ingress",
        "MyIngress.myTunnel_forward", "MyIngress.myTunnel_egress"]
    egress = info.actions[5]
    assert [(p.id, p.name, p.bitwidth) for p in egress.params] == [(1, "dstAddr", 48), (2, "port", 9)]
    assert [(c.preamble.name, c.spec.unit, c.size) for c in info.counters] == [
        ("MyIngress.ingressTunnelCounter", p4i.CounterSpec.BOTH, 65536),
        ("MyIngress.egressTunnelCounter", p4i.CounterSpec.BOTH, 65536)]


def test_jenkins_hash_and_noaction():
    assert (1 << 24) | (jenkins_one_at_a_time(b"NoAction") & 0xFFFFFF) == 21257015
    assert jenkins_one_at_a_time(b"") == 0


def test_id_collisions_probe_linearly_in_sorted_order():
    # find two names whose hashes collide in the low 24 bits
    seen: dict[int, str] = {}
    pair = None
    for i in itertools.count():
        name = f"c.t{i}"
        low = jenkins_one_at_a_time(name.encode()) & 0xFFFFFF
        if low in seen:
            pair = (seen[low], name)
            break
        seen[low] = name
    first, second = sorted(pair)
    alloc = IdAllocator()
    alloc.add(2, second, None)
    alloc.add(2, first, None)
    alloc.compute()
    low = jenkins_one_at_a_time(first.encode()) & 0xFFFFFF
    assert alloc(2, first) == (2 << 24) | low
    assert alloc(2, second) == (2 << 24) | ((low + 1) & 0xFFFFFF)


def test_aliases_are_shortest_unique_suffixes():
    s = SuffixSet()
    for n in ("MyIngress.a.t", "MyIngress.b.t", "MyIngress.c", "MyEgress.c", "NoAction"):
        s.add(n)
    assert s.alias("MyIngress.a.t") == "a.t"
    assert s.alias("MyIngress.b.t") == "b.t"
    assert s.alias("MyIngress.c") == "MyIngress.c"
    assert s.alias("NoAction") == "NoAction"


ID_PROGRAM = PRELUDE + """
struct metadata { }
struct headers { ethernet_t ethernet; }
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(h.ethernet); transition accept; }
}
control VC(inout headers h, inout metadata m) { apply { } }
control I(inout headers h, inout metadata m, inout standard_metadata_t s) {
    @id(7) @brief("does nothing") @custom(1, "x") action a() { }
    @name("renamed") @id(0x02000009) table t { key = { h.ethernet.dstAddr: exact; } actions = { a; } }
    @name(".global_b") action b() { }
    table u { key = { h.ethernet.srcAddr: exact; } actions = { b; @defaultonly NoAction; } }
    apply { t.apply(); u.apply(); }
}
control E(inout headers h, inout metadata m, inout standard_metadata_t s) { apply { } }
control CC(inout headers h, inout metadata m) { apply { } }
control D(packet_out p, in headers h) { apply { p.emit(h.ethernet); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_id_and_name_annotations(tmp_path):
    info = compile_src(tmp_path, ID_PROGRAM).p4info
    pre = all_preambles(info)
    assert pre["I.a"].id == 0x01000007          # prefix added to a bare @id
    assert pre["I.a"].doc.brief == "does nothing"
    assert list(pre["I.a"].annotations) == ['@custom(1, "x")']
    assert pre["I.renamed"].id == 0x02000009    # @name replaces the local part
    assert "global_b" in pre                    # leading dot: global name
    u = [t for t in info.tables if t.preamble.name == "I.u"][0]
    noaction = [r for r in u.action_refs if r.id == 21257015][0]
    assert noaction.scope == p4i.ActionRef.DEFAULT_ONLY
    assert list(noaction.annotations) == ["@defaultonly"]


def test_duplicate_and_wrong_prefix_ids_are_rejected(tmp_path):
    dup = ID_PROGRAM.replace("@name(\".global_b\") action b()", "@id(7) action b()")
    with pytest.raises(CompileError, match="assigned to multiple"):
        compile_src(tmp_path, dup)
    wrong = ID_PROGRAM.replace("@id(0x02000009)", "@id(0x01000009)")
    with pytest.raises(CompileError, match="wrong 8-bit prefix"):
        compile_src(tmp_path, wrong)


EXTERNS = PRELUDE + """
@controller_header("packet_in")
header packet_in_header_t { bit<9> ingress_port; bit<7> pad; }
@controller_header("packet_out")
header packet_out_t { bit<9> egress_port; bit<7> pad; }
struct digest_t { bit<48> mac; bit<9> port; }
struct metadata { bit<14> sel; bit<32> color; }
struct headers { packet_out_t po; ethernet_t ethernet; ipv4_t ipv4; }
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t s) {
    value_set<bit<16>>(8) types;
    state start { p.extract(h.ethernet); transition select(h.ethernet.etherType) { types: ip; default: accept; } }
    state ip { p.extract(h.ipv4); transition accept; }
}
control VC(inout headers h, inout metadata m) { apply { } }
control I(inout headers h, inout metadata m, inout standard_metadata_t s) {
    direct_counter(CounterType.packets) hits;
    direct_meter<bit<32>>(MeterType.bytes) rate;
    meter(32, MeterType.packets) pm;
    register<bit<48>>(16) last_seen;
    action_selector(HashAlgorithm.crc16, 32w128, 32w14) sel;
    action_profile(64) prof;
    action fwd(bit<9> port) { s.egress_spec = port; rate.read(m.color); }
    action learn() { digest<digest_t>(1, { h.ethernet.srcAddr, s.ingress_port }); }
    table mac { key = { h.ethernet.dstAddr: exact; } actions = { fwd; learn; }
                counters = hits; meters = rate; support_timeout = true; size = 512; }
    table ecmp { key = { h.ipv4.dstAddr: lpm; h.ipv4.srcAddr: selector; } actions = { fwd; } implementation = sel; }
    table prof_t { key = { h.ipv4.protocol: exact; } actions = { fwd; } implementation = prof; }
    table fixed { key = { h.ipv4.ttl: ternary; } actions = { fwd; NoAction; }
                  const default_action = NoAction();
                  const entries = { 0 &&& 0xff: fwd(1); } }
    apply {
        mac.apply(); ecmp.apply(); prof_t.apply(); fixed.apply();
        pm.execute_meter((bit<32>) s.ingress_port, m.color);
        last_seen.write(0, h.ethernet.srcAddr);
    }
}
control E(inout headers h, inout metadata m, inout standard_metadata_t s) { apply { } }
control CC(inout headers h, inout metadata m) { apply { } }
control D(packet_out p, in headers h) { apply { p.emit(h.ethernet); p.emit(h.ipv4); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_extern_objects_in_p4info(tmp_path):
    info = compile_src(tmp_path, EXTERNS).p4info
    tables = {t.preamble.name: t for t in info.tables}
    ids = {p.name: p.id for p in all_preambles(info).values()}

    mac = tables["I.mac"]
    assert mac.size == 512
    assert mac.idle_timeout_behavior == p4i.Table.NOTIFY_CONTROL
    assert list(mac.direct_resource_ids) == [ids["I.hits"], ids["I.rate"]]
    (dc,) = info.direct_counters
    assert (dc.preamble.name, dc.spec.unit, dc.direct_table_id) == ("I.hits", p4i.CounterSpec.PACKETS, ids["I.mac"])
    (dm,) = info.direct_meters
    assert (dm.spec.unit, dm.direct_table_id) == (p4i.MeterSpec.BYTES, ids["I.mac"])
    (m,) = info.meters
    assert (m.preamble.name, m.spec.unit, m.size) == ("I.pm", p4i.MeterSpec.PACKETS, 32)

    ecmp = tables["I.ecmp"]
    assert [f.name for f in ecmp.match_fields] == ["hdr.ipv4.dstAddr".replace("hdr", "h")]  # selector key excluded
    profiles = {p.preamble.name: p for p in info.action_profiles}
    assert ecmp.implementation_id == ids["I.sel"]
    assert profiles["I.sel"].with_selector and profiles["I.sel"].size == 128
    assert list(profiles["I.sel"].table_ids) == [ids["I.ecmp"]]
    assert not profiles["I.prof"].with_selector and profiles["I.prof"].size == 64

    fixed = tables["I.fixed"]
    assert fixed.const_default_action_id == 21257015
    assert fixed.is_const_table and fixed.has_initial_entries

    (reg,) = info.registers
    assert (reg.preamble.name, reg.size, reg.type_spec.bitstring.bit.bitwidth) == ("I.last_seen", 16, 48)
    (dg,) = info.digests
    assert dg.preamble.name == "digest_t" and dg.type_spec.struct.name == "digest_t"
    members = info.type_info.structs["digest_t"].members
    assert [(x.name, x.type_spec.bitstring.bit.bitwidth) for x in members] == [("mac", 48), ("port", 9)]
    (vs,) = info.value_sets
    assert (vs.preamble.name, vs.size, [f.bitwidth for f in vs.match]) == ("P.types", 8, [16])
    cpm = {c.preamble.name: c for c in info.controller_packet_metadata}
    assert sorted(cpm) == ["packet_in", "packet_out"]
    assert list(cpm["packet_in"].preamble.annotations) == ['@controller_header("packet_in")']
    assert [(x.id, x.name, x.bitwidth) for x in cpm["packet_in"].metadata] == [(1, "ingress_port", 9), (2, "pad", 7)]
    # IDs carry their resource-type prefix
    # p4c hashes the header type name: fabric.p4's packet_in_header_t is 81826293 there too
    assert cpm["packet_in"].preamble.id == 81826293
    prefixes = {"I.hits": 0x13, "I.rate": 0x15, "I.pm": 0x14, "I.last_seen": 0x16, "digest_t": 0x17,
                "P.types": 0x03, "I.sel": 0x11, "I.mac": 0x02, "I.fwd": 0x01}
    assert {n: ids[n] >> 24 for n in prefixes} == prefixes


def test_text_form_round_trips(tmp_path):
    info = compile_src(tmp_path, TUNNEL).p4info
    text = text_format.MessageToString(info)
    again = text_format.Parse(text, p4i.P4Info())
    assert again == info
    # non-structural annotations are copied into the preamble, as p4c does
    assert list(info.actions[0].preamble.annotations) == ['@noWarn("unused")']


def test_type_declared_keys_and_params_carry_their_type_name(tmp_path):
    src = ID_PROGRAM.replace("struct metadata { }", "type bit<9> PortId_t;\nstruct metadata { PortId_t port; }")
    src = src.replace("action a() { }", "action a(PortId_t p) { m.port = p; }")
    src = src.replace("table u { key = { h.ethernet.srcAddr: exact; }", "table u { key = { m.port: exact; }")
    info = compile_src(tmp_path, src).p4info
    a = [x for x in info.actions if x.preamble.name == "I.a"][0]
    assert (a.params[0].bitwidth, a.params[0].type_name.name) == (9, "PortId_t")
    u = [t for t in info.tables if t.preamble.name == "I.u"][0]
    assert u.match_fields[0].type_name.name == "PortId_t"
    assert info.type_info.new_types["PortId_t"].original_type.bitstring.bit.bitwidth == 9


DEFAULTS = PRELUDE + """
struct metadata { }
struct headers { ethernet_t ethernet; }
parser MyParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.ethernet); transition accept; }
}
control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    action set_port(bit<9> port) { standard_metadata.egress_spec = port; }
    action drop() { mark_to_drop(standard_metadata); }
    table implicit { key = { hdr.ethernet.dstAddr: exact; } actions = { set_port; } }
    table explicit { key = { hdr.ethernet.srcAddr: exact; } actions = { set_port; drop; } default_action = drop(); }
    table fixed { key = { hdr.ethernet.etherType: exact; } actions = { set_port; drop; }
                  const default_action = set_port(1); }
    apply { implicit.apply(); explicit.apply(); fixed.apply(); }
}
control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out packet, in headers hdr) { apply { packet.emit(hdr); } }
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
"""


def test_default_actions_as_p4c_writes_them(tmp_path):
    """Every table names the default action it starts with; a table without a
    default_action gets NoAction as a @defaultonly action and default (p4c's rule)."""
    result = compile_src(tmp_path, DEFAULTS)
    tables = {t.preamble.name: t for t in result.p4info.tables}
    actions = {a.preamble.name: a.preamble.id for a in result.p4info.actions}
    implicit = tables["MyIngress.implicit"]
    assert [(r.id, r.scope, list(r.annotations)) for r in implicit.action_refs] == [
        (actions["MyIngress.set_port"], p4i.ActionRef.TABLE_AND_DEFAULT, []),
        (actions["NoAction"], p4i.ActionRef.DEFAULT_ONLY, ["@defaultonly"])]
    assert implicit.initial_default_action.action_id == actions["NoAction"] == 21257015
    assert tables["MyIngress.explicit"].initial_default_action.action_id == actions["MyIngress.drop"]
    assert not tables["MyIngress.explicit"].const_default_action_id
    fixed = tables["MyIngress.fixed"]
    assert fixed.const_default_action_id == fixed.initial_default_action.action_id == actions["MyIngress.set_port"]
    # its action data, each value in the parameter's full width of bytes (port: 9 bits)
    assert [(a.param_id, a.value) for a in fixed.initial_default_action.arguments] == [(1, b"\x00\x01")]
    assert not tables["MyIngress.explicit"].initial_default_action.arguments
    json_tables = {t["name"]: t for t in result.bmv2_json["pipelines"][0]["tables"]}
    no_action = next(a["id"] for a in result.bmv2_json["actions"] if a["name"] == "NoAction")
    assert json_tables["MyIngress.implicit"]["actions"] == ["MyIngress.set_port", "NoAction"]
    assert json_tables["MyIngress.implicit"]["default_entry"]["action_id"] == no_action
