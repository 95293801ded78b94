"""BMv2 JSON structure of compiled programs, against hand-derived expectations.

Expectations follow behavioral-model's docs/JSON_format.md and the shapes p4c's bmv2
back end emits (e.g. ``(ttl - 1) & 0xff`` for ``bit<8>`` arithmetic, ``tbl_act``
tables for apply-block statements, ``__HIT__``/``__MISS__`` next tables). Expressions
are compared through `show`, a compact infix rendering of the JSON trees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from p4sim.compiler import CompileError, compile_file

HEADERS = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header vlan_t { bit<3> pcp; bit<1> cfi; bit<12> vid; bit<16> etherType; }
"""

DEFAULT_PARSER = """
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
"""


def program(ingress: str = "", apply: str = "", meta: str = "", parser: str = DEFAULT_PARSER,
            parser_locals: str = "", headers: str = "ethernet_t ethernet; ipv4_t ipv4;", top: str = "",
            egress: str = "", compute: str = "", controls: str = "") -> str:
    """A v1model program; ``top`` goes before the structs, ``controls`` after them."""
    return HEADERS + top + f"""
struct metadata {{ {meta} }}
struct headers {{ {headers} }}
{controls}
parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {{
    {parser_locals}
    {parser}
}}
control MyVerifyChecksum(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {{
    {ingress}
    apply {{ {apply} }}
}}
control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {{
    apply {{ {egress} }}
}}
control MyComputeChecksum(inout headers hdr, inout metadata meta) {{ apply {{ {compute} }} }}
control MyDeparser(packet_out pkt, in headers hdr) {{ apply {{ pkt.emit(hdr); }} }}
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
"""


def build(tmp_path: Path, src: str) -> dict:
    p = tmp_path / "prog.p4"
    p.write_text(src)
    return compile_file(str(p)).bmv2_json


def show(n: Any) -> str:
    """Infix text of a type-value node: fields ``h.f``, constants as hexstr,
    ``rd[i]`` for action data (``local``/``runtime_data``)."""
    t, v = n["type"], n["value"]
    if t == "expression":
        if "op" not in v:
            return show(v)
        if v["op"] == "?":
            return f"({show(v['cond'])} ? {show(v['left'])} : {show(v['right'])})"
        if v["left"] is None:
            return f"{v['op']}({show(v['right'])})"
        right = v["right"] if isinstance(v["right"], int) else show(v["right"])
        return f"({show(v['left'])} {v['op']} {right})"
    if t == "field":
        return ".".join(v)
    if t in ("local", "runtime_data"):
        return f"rd[{v}]"
    return str(v).lower() if t == "bool" else str(v)


def prims(j: dict, action: str) -> list[str]:
    (a,) = [a for a in j["actions"] if a["name"] == action]
    return [f"{p['op']}({', '.join(show(x) for x in p['parameters'])})" for p in a["primitives"]]


def pipeline(j: dict, name: str = "ingress") -> dict:
    return [p for p in j["pipelines"] if p["name"] == name][0]


def table(j: dict, name: str) -> dict:
    for p in j["pipelines"]:
        for t in p["tables"]:
            if t["name"] == name:
                return t
    raise KeyError(name)


def single_act(j: dict, pipe: str = "ingress") -> list[str]:
    """Primitives of the one synthesized action an apply block became."""
    p = pipeline(j, pipe)
    t = table(j, p["init_table"])
    return prims(j, t["actions"][0])


# ------------------------------------------------------------------ layout


def test_layout_like_p4c(tmp_path):
    j = build(tmp_path, program(meta="bit<14> sel; bool flag; int<8> delta;",
                                headers="ethernet_t ethernet; vlan_t[2] vlans; ipv4_t ipv4;"))
    assert [h["name"] for h in j["headers"]] == ["scalars", "standard_metadata", "ethernet",
                                                 "vlans[0]", "vlans[1]", "ipv4"]
    assert [h["metadata"] for h in j["headers"]] == [True, True, False, False, False, False]
    scalars = j["header_types"][0]
    assert scalars["name"] == "scalars_0"
    assert scalars["fields"] == [["metadata.sel", 14, False], ["metadata.flag", 1, False],
                                 ["metadata.delta", 8, True], ["_padding_0", 1, False]]
    std = j["header_types"][1]
    assert std["name"] == "standard_metadata"
    assert std["fields"][:3] == [["ingress_port", 9, False], ["egress_spec", 9, False], ["egress_port", 9, False]]
    assert sum(f[1] for f in std["fields"]) % 8 == 0
    (stack,) = j["header_stacks"]
    assert stack["name"] == "vlans" and stack["header_type"] == "vlan_t"
    assert stack["header_ids"] == [3, 4]
    assert j["errors"][0] == ["NoError", 0] and ["NoMatch", 2] in j["errors"]
    assert j["deparsers"][0]["order"] == ["ethernet", "vlans[0]", "vlans[1]", "ipv4"]
    assert j["__meta__"]["version"] == [2, 23]
    assert j["program"] == "prog.p4"


# ------------------------------------------------------------------ expressions


@pytest.mark.parametrize("stmt, expected", [
    ("hdr.ipv4.ttl = hdr.ipv4.ttl - 1;", "assign(ipv4.ttl, ((ipv4.ttl - 0x01) & 0xff))"),
    ("hdr.ipv4.ttl = hdr.ipv4.ttl + hdr.ipv4.protocol;", "assign(ipv4.ttl, ((ipv4.ttl + ipv4.protocol) & 0xff))"),
    ("hdr.ipv4.ttl = hdr.ipv4.ttl >> 2;", "assign(ipv4.ttl, (ipv4.ttl >> 0x2))"),
    ("hdr.ipv4.ttl = hdr.ipv4.ttl << 2;", "assign(ipv4.ttl, ((ipv4.ttl << 0x2) & 0xff))"),
    ("hdr.ipv4.ttl = ~hdr.ipv4.ttl;", "assign(ipv4.ttl, (~(ipv4.ttl) & 0xff))"),
    ("hdr.ipv4.ttl = -hdr.ipv4.ttl;", "assign(ipv4.ttl, ((0x0 - ipv4.ttl) & 0xff))"),
    ("hdr.ipv4.ttl = hdr.ipv4.ttl |+| 200;", "assign(ipv4.ttl, ((ipv4.ttl + 0xc8) usat_cast 0x8))"),
    ("meta.delta = meta.delta |-| 100;", "assign(scalars.metadata.delta, ((scalars.metadata.delta - 0x64) sat_cast 0x8))"),
    ("meta.delta = meta.delta + 1;", "assign(scalars.metadata.delta, ((scalars.metadata.delta + 0x01) two_comp_mod 0x8))"),
    ("hdr.ipv4.ttl = (bit<8>) hdr.ipv4.srcAddr;", "assign(ipv4.ttl, (ipv4.srcAddr & 0xff))"),
    ("hdr.ipv4.srcAddr = (bit<32>) hdr.ipv4.ttl;", "assign(ipv4.srcAddr, ipv4.ttl)"),
    ("meta.delta = (int<8>) hdr.ipv4.ttl;", "assign(scalars.metadata.delta, (ipv4.ttl two_comp_mod 0x8))"),
    ("hdr.ipv4.ttl = hdr.ipv4.srcAddr[15:8];", "assign(ipv4.ttl, ((ipv4.srcAddr >> 0x8) & 0xff))"),
    ("hdr.ipv4.totalLen = hdr.ipv4.ttl ++ hdr.ipv4.protocol;",
     "assign(ipv4.totalLen, ((ipv4.ttl << 0x8) | ipv4.protocol))"),
    ("hdr.ipv4.diffserv[7:2] = 46;",
     "assign(ipv4.diffserv, ((ipv4.diffserv & 0x03) | ((0x2e << 0x2) & 0xfc)))"),
    ("hdr.ipv4.diffserv[1:0] = 3;",
     "assign(ipv4.diffserv, ((ipv4.diffserv & 0xfc) | (0x03 & 0x03)))"),
    ("hdr.ipv4.ttl = hdr.ipv4.isValid() ? 8w1 : 8w2;", "assign(ipv4.ttl, (d2b(ipv4.$valid$) ? 0x01 : 0x02))"),
    ("meta.flag = hdr.ipv4.ttl > 3 && !meta.flag;",
     "assign(scalars.metadata.flag, b2d(((ipv4.ttl > 0x03) and not(d2b(scalars.metadata.flag)))))"),
    ("meta.flag = true;", "assign(scalars.metadata.flag, 0x01)"),
    ("hdr.ipv4.ttl = 46 << 2 + 0;", "assign(ipv4.ttl, 0xb8)"),  # folded like p4c
    ("standard_metadata.parser_error = error.NoMatch;", "assign(standard_metadata.parser_error, 0x00000002)"),
])
def test_expression_width_semantics(tmp_path, stmt, expected):
    j = build(tmp_path, program(meta="bool flag; int<8> delta;", apply=stmt))
    assert single_act(j) == [expected]


def test_header_and_struct_assignment(tmp_path):
    j = build(tmp_path, program(
        meta="ethernet_t copy; bit<8> a; bit<8> b;", top="struct pair_t { bit<8> a; bit<8> b; }",
        ingress="pair_t p;",
        apply="meta.copy = hdr.ethernet; hdr.ipv4.setValid(); hdr.ethernet.setInvalid(); "
              "p = {1, 2}; meta.a = p.b;"))
    assert [h["name"] for h in j["headers"]][2:] == ["ethernet", "ipv4", "metadata.copy"]
    assert single_act(j) == [
        "assign_header(metadata.copy, ethernet)",
        "add_header(ipv4)",
        "remove_header(ethernet)",
        "assign(scalars.p.a, 0x01)",
        "assign(scalars.p.b, 0x02)",
        "assign(scalars.metadata.a, scalars.p.b)",
    ]


# ------------------------------------------------------------------ actions


def test_if_in_action_uses_jumps_and_nested_calls_inline(tmp_path):
    j = build(tmp_path, program(
        top="bit<8> max8(in bit<8> a, in bit<8> b) { if (a > b) { return a; } return b; }",
        ingress="""
        action drop() { mark_to_drop(standard_metadata); }
        action route(bit<9> port, bit<8> floor) {
            standard_metadata.egress_spec = port;
            if (hdr.ipv4.ttl <= 1) { drop(); } else { hdr.ipv4.ttl = hdr.ipv4.ttl - 1; }
            hdr.ipv4.diffserv = max8(hdr.ipv4.diffserv, floor);
        }
        table t { key = { hdr.ipv4.dstAddr: lpm; } actions = { route; drop; } }
        """, apply="t.apply();"))
    (route,) = [a for a in j["actions"] if a["name"] == "MyIngress.route"]
    assert route["runtime_data"] == [{"name": "port", "bitwidth": 9}, {"name": "floor", "bitwidth": 8}]
    assert prims(j, "MyIngress.route") == [
        "assign(standard_metadata.egress_spec, rd[0])",
        "_jump_if_zero(b2d((ipv4.ttl <= 0x01)), 0x4)",
        "mark_to_drop(standard_metadata)",
        "_jump(0x5)",
        "assign(ipv4.ttl, ((ipv4.ttl - 0x01) & 0xff))",
        # max8 inlined: `in` arguments copied, `return` jumps to the end
        "assign(scalars.a, ipv4.diffserv)",
        "assign(scalars.b, rd[1])",
        "_jump_if_zero(b2d((scalars.a > scalars.b)), 0xa)",
        "assign(scalars.retval, scalars.a)",
        "_jump(0xb)",
        "assign(scalars.retval, scalars.b)",
        "assign(ipv4.diffserv, scalars.retval)",
    ]


def test_table_json(tmp_path):
    j = build(tmp_path, program(ingress="""
        action set_port(bit<9> port) { standard_metadata.egress_spec = port; }
        table fwd {
            key = { hdr.ethernet.dstAddr: exact; hdr.ipv4.dstAddr: lpm; hdr.ipv4.isValid(): exact; }
            actions = { set_port; NoAction; }
            default_action = set_port(511);
            size = 64;
        }
        table acl {
            key = { hdr.ipv4.srcAddr: ternary; hdr.ipv4.protocol: range; hdr.ipv4.ttl: optional; }
            actions = { set_port; NoAction; }
            const default_action = NoAction();
            const entries = {
                (0x0a000000 &&& 0xff000000, 6..17, _): set_port(1);
                (_, _, 64): set_port(2);
                (0x0b000001, 1, _): NoAction();
            }
        }
        """, apply="fwd.apply(); acl.apply();"))
    fwd = table(j, "MyIngress.fwd")
    assert fwd["key"] == [
        {"match_type": "exact", "name": "hdr.ethernet.dstAddr", "target": ["ethernet", "dstAddr"], "mask": None},
        {"match_type": "lpm", "name": "hdr.ipv4.dstAddr", "target": ["ipv4", "dstAddr"], "mask": None},
        {"match_type": "exact", "name": "hdr.ipv4.$valid$", "target": ["ipv4", "$valid$"], "mask": None},
    ]
    assert (fwd["match_type"], fwd["type"], fwd["max_size"]) == ("lpm", "simple", 64)
    ids = {a["name"]: a["id"] for a in j["actions"]}
    assert fwd["action_ids"] == [ids["MyIngress.set_port"], ids["NoAction"]]
    assert fwd["default_entry"] == {"action_id": ids["MyIngress.set_port"], "action_const": False,
                                    "action_data": ["0x01ff"], "action_entry_const": False}
    assert fwd["next_tables"] == {"MyIngress.set_port": "MyIngress.acl", "NoAction": "MyIngress.acl"}
    acl = table(j, "MyIngress.acl")
    assert acl["match_type"] == "range"
    assert acl["default_entry"]["action_const"] is True
    assert acl["entries"] == [
        {"match_key": [{"match_type": "ternary", "key": "0x0a000000", "mask": "0xff000000"},
                       {"match_type": "range", "start": "0x06", "end": "0x11"},
                       {"match_type": "optional", "key": "0x00", "mask": "0x00"}],
         "action_entry": {"action_id": ids["MyIngress.set_port"], "action_data": ["0x0001"]}, "priority": 1},
        {"match_key": [{"match_type": "ternary", "key": "0x00000000", "mask": "0x00000000"},
                       {"match_type": "range", "start": "0x00", "end": "0xff"},
                       {"match_type": "optional", "key": "0x40", "mask": "0xff"}],
         "action_entry": {"action_id": ids["MyIngress.set_port"], "action_data": ["0x0002"]}, "priority": 2},
        {"match_key": [{"match_type": "ternary", "key": "0x0b000001", "mask": "0xffffffff"},
                       {"match_type": "range", "start": "0x01", "end": "0x01"},
                       {"match_type": "optional", "key": "0x00", "mask": "0x00"}],
         "action_entry": {"action_id": ids["NoAction"], "action_data": []}, "priority": 3},
    ]


# ------------------------------------------------------------------ control flow


def test_apply_block_graph(tmp_path):
    j = build(tmp_path, program(ingress="""
        action a() { hdr.ipv4.ttl = 1; }
        action b() { hdr.ipv4.ttl = 2; }
        table t1 { key = { hdr.ipv4.dstAddr: exact; } actions = { a; b; } }
        table t2 { key = { hdr.ipv4.srcAddr: exact; } actions = { a; NoAction; } }
        table t3 { key = { hdr.ethernet.dstAddr: exact; } actions = { b; } }
        """, apply="""
        standard_metadata.egress_spec = 1;
        if (hdr.ipv4.isValid()) {
            switch (t1.apply().action_run) {
                a: { t3.apply(); }
                default: { exit; }
            }
        } else if (!t2.apply().hit) {
            b();
            return;
        }
        hdr.ipv4.protocol = 7;
        """))
    p = pipeline(j)
    conds = {c["name"]: c for c in p["conditionals"]}
    first = table(j, p["init_table"])
    assert first["actions"][0].startswith("act") and first["default_entry"]["action_const"]
    cond = conds[first["next_tables"][first["actions"][0]]]
    assert show(cond["expression"]) == "d2b(ipv4.$valid$)"
    t1 = table(j, cond["true_next"])
    tail = table(j, "MyIngress.t3")["base_default_next"]
    assert prims(j, table(j, tail)["actions"][0]) == ["assign(ipv4.protocol, 0x07)"]
    assert t1["name"] == "MyIngress.t1"
    assert t1["next_tables"]["MyIngress.a"] == "MyIngress.t3"
    exit_table = table(j, t1["next_tables"]["MyIngress.b"])
    assert prims(j, exit_table["actions"][0]) == ["exit()"]
    assert exit_table["base_default_next"] is None
    t2 = table(j, cond["false_next"])
    assert t2["name"] == "MyIngress.t2"
    assert t2["next_tables"]["__HIT__"] == tail
    tbl_b = table(j, t2["next_tables"]["__MISS__"])
    assert tbl_b["name"] == "tbl_b" and tbl_b["actions"] == ["MyIngress.b"]
    assert tbl_b["base_default_next"] is None  # return ends the control


def test_sub_control_is_inlined_with_qualified_names(tmp_path):
    src = program(
        controls="""
        control Counted(inout headers hdr, inout standard_metadata_t sm) {
            counter(8, CounterType.packets) c;
            action hit() { c.count(0); }
            table t { key = { hdr.ethernet.dstAddr: exact; } actions = { hit; } }
            apply { t.apply(); }
        }""",
        ingress="Counted() first; Counted() second;",
        apply="first.apply(hdr, standard_metadata); second.apply(hdr, standard_metadata);")
    j = build(tmp_path, src)
    names = [t["name"] for t in pipeline(j)["tables"]]
    assert "MyIngress.first.t" in names and "MyIngress.second.t" in names
    assert [c["name"] for c in j["counter_arrays"]] == ["MyIngress.first.c", "MyIngress.second.c"]
    assert prims(j, "MyIngress.second.hit") == ["count(MyIngress.second.c, 0x00000000)"]
    # no default_action: NoAction is added (@defaultonly) and is the default, as p4c does
    assert table(j, "MyIngress.first.t")["next_tables"] == {"MyIngress.first.hit": "MyIngress.second.t",
                                                            "NoAction": "MyIngress.second.t"}
    assert table(j, "MyIngress.first.t")["default_entry"]["action_id"] == \
        next(a["id"] for a in j["actions"] if a["name"] == "NoAction")


def test_sub_control_instance_applied_twice_is_inlined_twice(tmp_path):
    """p4c accepts applying one control instance several times (each apply is inlined
    with its own arguments); only a table inside it cannot appear twice in BMv2."""
    from p4sim.switch.v1model import V1Switch, run_to_completion

    sub = """
        control Dec(inout bit<8> v, in bit<8> by) {
            apply { v = v - by; }
        }"""
    src = program(controls=sub, ingress="Dec() dec;",
                  apply="dec.apply(hdr.ipv4.ttl, 1); dec.apply(hdr.ipv4.ttl, hdr.ipv4.protocol); "
                        "standard_metadata.egress_spec = 2;")
    sw = V1Switch(build(tmp_path, src))
    ipv4 = bytes([0x45, 0, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0]) + bytes(8)
    [(port, out)] = run_to_completion(sw, 1, bytes(12) + b"\x08\x00" + ipv4)
    assert port == 2 and out[14 + 8] == 64 - 1 - 6
    with_table = sub.replace("apply { v = v - by; }", """
            table t { key = { v: exact; } actions = { NoAction; } }
            apply { t.apply(); }""")
    src = program(controls=with_table, ingress="Dec() dec;",
                  apply="dec.apply(hdr.ipv4.ttl, 1); dec.apply(hdr.ipv4.ttl, 2);")
    with pytest.raises(CompileError, match="table 'MyIngress.dec.t' is applied more than once") as info:
        build(tmp_path, src)
    assert info.value.kind == "unsupported" and info.value.pos.line > 0



def test_loops_around_controls_are_unrolled_others_stay_jumps(tmp_path):
    """A loop in an apply block that applies a control is unrolled (p4c's
    UnrollLoops): its values come from running the condition and the update at
    compile time with the index's width, so ``254, 255, 0, 1`` (4 iterations). A loop
    that applies nothing stays a loop (``_jump``) in the synthesized action."""
    from p4sim.switch.v1model import V1Switch, run_to_completion

    src = program(controls="control Dec(inout bit<8> v) { apply { v = v - 1; } }", ingress="Dec() dec;",
                  apply="""for (bit<8> i = 254; i != 2; i = i + 1) { dec.apply(hdr.ipv4.ttl); }
                           for (bit<8> j = 0; j < hdr.ipv4.protocol; j = j + 1) {
                               hdr.ipv4.diffserv = hdr.ipv4.diffserv + 1; }
                           standard_metadata.egress_spec = 2;""")
    j = build(tmp_path, src)
    jumping = [a["name"] for a in j["actions"] if any(p["op"] == "_jump" for p in a["primitives"])]
    assert len(jumping) == 1 and "assign(ipv4.diffserv, ((ipv4.diffserv + 0x01) & 0xff))" in prims(j, jumping[0])
    ipv4 = bytes([0x45, 0, 0, 20, 0, 0, 0, 0, 64, 3, 0, 0]) + bytes(8)
    [(port, out)] = run_to_completion(V1Switch(j), 1, bytes(12) + b"\x08\x00" + ipv4)
    assert port == 2 and out[14 + 8] == 64 - 4 and out[14 + 1] == 3


def test_for_in_stack_element_type_must_match(tmp_path):
    src = program(headers="ethernet_t ethernet; ipv4_t ipv4; vlan_t[2] vl;",
                  apply="for (ipv4_t x in hdr.vl) { }")
    with pytest.raises(CompileError, match="does not match the header stack's element type vlan_t"):
        build(tmp_path, src)


def test_condition_decided_by_a_constant_operand_is_folded(tmp_path):
    """``DEBUG && x`` with ``DEBUG`` false is false whatever ``x`` is (p4c folds it and
    drops the branch); ``true || x`` likewise is true: no conditional is emitted."""
    j = build(tmp_path, program(top="const bool DEBUG = false;", apply="""
        if (DEBUG && hdr.ipv4.isValid()) { hdr.ipv4.ttl = 1; } else { hdr.ipv4.ttl = 2; }
        if (!DEBUG || hdr.ipv4.isValid()) { hdr.ipv4.protocol = 3; }"""))
    p = pipeline(j)
    assert p["conditionals"] == []
    assert sorted(prims(j, t["actions"][0]) for t in p["tables"]) == \
        [["assign(ipv4.protocol, 0x03)"], ["assign(ipv4.ttl, 0x02)"]]


# ------------------------------------------------------------------ parser


def test_parser_transitions(tmp_path):
    j = build(tmp_path, program(
        headers="ethernet_t ethernet; vlan_t[2] vlans; ipv4_t ipv4;",
        parser_locals="value_set<bit<16>>(4) tpids;",
        parser="""
        state start {
            pkt.extract(hdr.ethernet);
            transition select(hdr.ethernet.etherType) {
                0x8100 &&& 0xefff: parse_vlan;
                tpids: parse_vlan;
                0x0800: parse_ipv4;
                default: accept;
            }
        }
        state parse_vlan {
            pkt.extract(hdr.vlans.next);
            transition select(hdr.vlans.last.etherType, pkt.lookahead<ipv4_t>().version) {
                (0x0800, 4): parse_ipv4;
                (0x0800, 0..3): reject;
                (_, _): accept;
            }
        }
        state parse_ipv4 {
            pkt.extract(hdr.ipv4);
            verify(hdr.ipv4.ihl >= 5, error.HeaderTooShort);
            pkt.advance(32);
            transition accept;
        }"""))
    (parser,) = j["parsers"]
    states = {s["name"]: s for s in parser["parse_states"]}
    assert parser["init_state"] == "start"
    assert states["start"]["transitions"] == [
        {"type": "hexstr", "value": "0x8100", "mask": "0xefff", "next_state": "parse_vlan"},
        {"type": "parse_vset", "value": "MyParser.tpids", "mask": None, "next_state": "parse_vlan"},
        {"type": "hexstr", "value": "0x0800", "mask": None, "next_state": "parse_ipv4"},
        {"type": "default", "value": None, "mask": None, "next_state": None},
    ]
    vlan = states["parse_vlan"]
    assert vlan["parser_ops"] == [{"op": "extract", "parameters": [{"type": "stack", "value": "vlans"}]}]
    assert vlan["transition_key"] == [{"type": "stack_field", "value": ["vlans", "etherType"]},
                                      {"type": "lookahead", "value": [0, 4]}]
    assert vlan["transitions"] == [
        {"type": "hexstr", "value": "0x080004", "mask": None, "next_state": "parse_ipv4"},
        # 0..3 as one mask; the 4-bit key is padded to a byte whose mask is 0x0c
        {"type": "hexstr", "value": "0x080000", "mask": "0xffff0c", "next_state": None},
        {"type": "default", "value": None, "mask": None, "next_state": None},
    ]
    ops = states["parse_ipv4"]["parser_ops"]
    assert ops[1] == {"op": "verify", "parameters": [
        {"type": "expression", "value": {"op": ">=", "left": {"type": "field", "value": ["ipv4", "ihl"]},
                                         "right": {"type": "hexstr", "value": "0x05"}}},
        {"type": "hexstr", "value": "0x00000004"}]}
    assert ops[2] == {"op": "advance", "parameters": [{"type": "hexstr", "value": "0x00000020"}]}
    assert j["parse_vsets"] == [{"name": "MyParser.tpids", "id": 0, "compressed_bitwidth": 16}]


def test_parser_range_expands_to_masks(tmp_path):
    j = build(tmp_path, program(parser="""
        state start {
            pkt.extract(hdr.ethernet);
            transition select(hdr.ethernet.etherType) { 0x0005..0x000c: accept; default: reject; }
        }"""))
    trans = j["parsers"][0]["parse_states"][0]["transitions"]
    assert [(t["value"], t["mask"]) for t in trans[:-1]] == [
        ("0x0005", None), ("0x0006", "0xfffe"), ("0x0008", "0xfffc"), ("0x000c", None)]


# ------------------------------------------------------------------ externs


def test_extern_primitives(tmp_path):
    j = build(tmp_path, program(
        meta="@field_list(1) bit<32> idx; bit<16> h; bit<48> last; bit<32> color;",
        top="struct digest_t { bit<48> src; bit<9> port; }",
        ingress="""
        counter(16, CounterType.packets) c;
        meter(16, MeterType.bytes) m;
        register<bit<48>>(16) r;
        """,
        apply="""
        c.count(meta.idx);
        m.execute_meter(meta.idx, meta.color);
        r.read(meta.last, meta.idx);
        r.write(meta.idx, hdr.ethernet.srcAddr);
        hash(meta.h, HashAlgorithm.crc16, 16w0, { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, 8w6 }, 32w1024);
        random(meta.idx, 0, 7);
        digest<digest_t>(1, { hdr.ethernet.srcAddr, standard_metadata.ingress_port });
        clone(CloneType.I2E, 100);
        clone_preserving_field_list(CloneType.I2E, 101, 1);
        resubmit_preserving_field_list(1);
        truncate(100);
        log_msg("ttl={}", { hdr.ipv4.ttl });
        mark_to_drop(standard_metadata);
        """,
        compute="""update_checksum(hdr.ipv4.isValid(), { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
                                   hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);"""))
    assert single_act(j) == [
        "count(MyIngress.c, scalars.metadata.idx)",
        "execute_meter(MyIngress.m, scalars.metadata.idx, scalars.metadata.color)",
        "register_read(scalars.metadata.last, MyIngress.r, scalars.metadata.idx)",
        "register_write(MyIngress.r, scalars.metadata.idx, ethernet.srcAddr)",
        "modify_field_with_hash_based_offset(scalars.metadata.h, 0x0000, calc, 0x00000400)",
        "modify_field_rng_uniform(scalars.metadata.idx, 0x00000000, 0x00000007)",
        "generate_digest(0x00000001, 0x00000001)",
        "clone_ingress_pkt_to_egress(0x00000064, 0x00000001)",
        "clone_ingress_pkt_to_egress(0x00000065, 0x00000002)",
        "resubmit(0x00000002)",
        "truncate(0x00000064)",
        "log_msg(ttl={}, [{'type': 'field', 'value': ['ipv4', 'ttl']}])",
        "mark_to_drop(standard_metadata)",
    ]
    calc, cksum_calc = j["calculations"]
    assert calc == {"name": "calc", "id": 0, "algo": "crc16", "input": [
        {"type": "field", "value": ["ipv4", "srcAddr"]}, {"type": "field", "value": ["ipv4", "dstAddr"]},
        {"type": "hexstr", "value": "0x06", "bitwidth": 8}]}
    assert j["learn_lists"] == [{"id": 1, "name": "digest_t", "elements": [
        {"type": "field", "value": ["ethernet", "srcAddr"]},
        {"type": "field", "value": ["standard_metadata", "ingress_port"]}]}]
    assert j["field_lists"] == [
        {"id": 1, "name": "fl", "elements": []},
        {"id": 2, "name": "field_list1", "elements": [{"type": "field", "value": ["scalars", "metadata.idx"]}]}]
    assert j["counter_arrays"] == [{"name": "MyIngress.c", "id": 0, "is_direct": False, "size": 16}]
    assert j["meter_arrays"] == [{"name": "MyIngress.m", "id": 0, "is_direct": False, "size": 16,
                                  "rate_count": 2, "type": "bytes"}]
    assert j["register_arrays"] == [{"name": "MyIngress.r", "id": 0, "size": 16, "bitwidth": 48}]
    (ck,) = j["checksums"]
    assert ck["target"] == ["ipv4", "hdrChecksum"] and ck["calculation"] == cksum_calc["name"]
    assert (ck["type"], ck["verify"], ck["update"]) == ("generic", False, True)
    assert show(ck["if_cond"]) == "d2b(ipv4.$valid$)"
    assert cksum_calc["algo"] == "csum16"


def test_selector_and_direct_resources(tmp_path):
    j = build(tmp_path, program(meta="bit<32> color;", ingress="""
        direct_counter(CounterType.packets_and_bytes) dc;
        direct_meter<bit<32>>(MeterType.packets) dm;
        action_selector(HashAlgorithm.crc32, 32w32, 32w10) sel;
        action fwd(bit<9> port) { standard_metadata.egress_spec = port; dm.read(meta.color); }
        table metered { key = { hdr.ethernet.dstAddr: exact; } actions = { fwd; } counters = dc; meters = dm; }
        table ecmp { key = { hdr.ipv4.dstAddr: lpm; hdr.ipv4.srcAddr: selector; hdr.ipv4.protocol: selector; }
                     actions = { fwd; } implementation = sel; }
        """, apply="metered.apply(); ecmp.apply();"))
    metered = table(j, "MyIngress.metered")
    assert metered["with_counters"] is True and metered["direct_meters"] == "MyIngress.dm"
    assert j["counter_arrays"] == [{"name": "MyIngress.dc", "id": 0, "is_direct": True,
                                    "binding": "MyIngress.metered"}]
    assert j["meter_arrays"] == [{"name": "MyIngress.dm", "id": 0, "is_direct": True, "rate_count": 2,
                                  "type": "packets", "size": 1024, "binding": "MyIngress.metered",
                                  "result_target": ["scalars", "metadata.color"]}]
    assert prims(j, "MyIngress.fwd") == ["assign(standard_metadata.egress_spec, rd[0])"]
    ecmp = table(j, "MyIngress.ecmp")
    assert (ecmp["type"], ecmp["action_profile"]) == ("indirect_ws", "MyIngress.sel")
    assert [k["target"] for k in ecmp["key"]] == [["ipv4", "dstAddr"]]
    assert pipeline(j)["action_profiles"] == [{"name": "MyIngress.sel", "id": 0, "max_size": 32, "selector": {
        "algo": "crc32", "input": [{"type": "field", "value": ["ipv4", "srcAddr"]},
                                   {"type": "field", "value": ["ipv4", "protocol"]}]}}]


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("apply, message", [
    ("t.apply(); t.apply();", "applied more than once"),
    ("verify_checksum(true, { hdr.ipv4.ttl }, hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);", "checksum controls"),
])
def test_rejected_programs_name_the_problem(tmp_path, apply, message):
    src = program(ingress="table t { key = { hdr.ipv4.dstAddr: exact; } actions = { NoAction; } }", apply=apply)
    with pytest.raises(CompileError, match=message) as info:
        build(tmp_path, src)
    assert info.value.pos.line > 0



def test_stack_last_index_is_not_a_constant(tmp_path):
    """``lastIndex`` follows ``nextIndex`` at run time: where the language demands a
    constant it is rejected, not taken as ``size - 1``."""
    src = program(headers="ethernet_t ethernet; vlan_t[2] vlans; ipv4_t ipv4;",
                  parser="state start { pkt.extract(hdr.vlans.next); "
                         "hdr.ethernet.etherType = hdr.ethernet.etherType[hdr.vlans.lastIndex:0]; "
                         "transition accept; }")
    with pytest.raises(CompileError, match="a slice bound must be a compile-time constant"):
        build(tmp_path, src)


# ------------------------------------------------------------------ p4c golden


def test_basic_forwarding_matches_p4c_output(tmp_path):
    """The P4 tutorials' basic forwarding program: parser, checksum and the
    ingress table as p4c emits them (its basic.json, minus source_info)."""
    j = build(tmp_path, (Path(__file__).parent / "p4" / "good" / "basic_ipv4.p4").read_text())
    ipv4_fields = ["version", "ihl", "diffserv", "totalLen", "identification", "flags", "fragOffset", "ttl",
                   "protocol", "srcAddr", "dstAddr"]
    assert j["calculations"] == [{"name": "calc", "id": 0, "algo": "csum16",
                                  "input": [{"type": "field", "value": ["ipv4", f]} for f in ipv4_fields]}]
    assert j["checksums"] == [{
        "name": "cksum", "id": 0, "target": ["ipv4", "hdrChecksum"], "type": "generic", "calculation": "calc",
        "verify": False, "update": True,
        "if_cond": {"type": "expression", "value": {"op": "d2b", "left": None,
                                                    "right": {"type": "field", "value": ["ipv4", "$valid$"]}}}}]
    ingress = pipeline(j)
    (cond,) = ingress["conditionals"]
    assert cond["source_info"]["source_fragment"] == "hdr.ipv4.isValid()"
    assert ingress["init_table"] == cond["name"]
    assert (cond["true_next"], cond["false_next"]) == ("MyIngress.ipv4_lpm", None)
    ids = {a["name"]: a["id"] for a in j["actions"]}
    assert [a["name"] for a in j["actions"]] == ["NoAction", "MyIngress.drop", "MyIngress.ipv4_forward"]
    (lpm,) = ingress["tables"]
    where = lpm.pop("source_info")
    assert (where["line"], where["source_fragment"]) == (74, "ipv4_lpm")
    assert where["filename"].endswith("prog.p4") and where["column"] == 10  # p4c counts from 0
    assert lpm == {
        "name": "MyIngress.ipv4_lpm", "id": 0,
        "key": [{"match_type": "lpm", "name": "hdr.ipv4.dstAddr", "target": ["ipv4", "dstAddr"], "mask": None}],
        "match_type": "lpm", "type": "simple", "max_size": 1024, "with_counters": False,
        "support_timeout": False, "direct_meters": None,
        "action_ids": [ids["MyIngress.ipv4_forward"], ids["MyIngress.drop"], ids["NoAction"]],
        "actions": ["MyIngress.ipv4_forward", "MyIngress.drop", "NoAction"],
        "base_default_next": None,
        "next_tables": {"MyIngress.ipv4_forward": None, "MyIngress.drop": None, "NoAction": None},
        "default_entry": {"action_id": ids["MyIngress.drop"], "action_const": False, "action_data": [],
                          "action_entry_const": False},
    }
    start, eth, ip = j["parsers"][0]["parse_states"]
    assert eth["transitions"] == [
        {"type": "hexstr", "value": "0x0800", "mask": None, "next_state": "parse_ipv4"},
        {"type": "default", "value": None, "mask": None, "next_state": None}]
    assert eth["transition_key"] == [{"type": "field", "value": ["ethernet", "etherType"]}]
    assert pipeline(j, "egress") == {"name": "egress", "id": 1, "init_table": None, "tables": [],
                                     "action_profiles": [], "conditionals": []}
    assert j["field_aliases"][0] == ["queueing_metadata.enq_timestamp", ["standard_metadata", "enq_timestamp"]]


def test_apply_block_reads_in_program_order(tmp_path):
    j = build(tmp_path, program(apply="""
        hdr.ipv4.ttl = 1;
        if (hdr.ipv4.isValid()) { hdr.ipv4.ttl = 2; } else { hdr.ipv4.ttl = 3; }
        hdr.ipv4.ttl = 4;"""))
    p = pipeline(j)
    assert [t["name"] for t in p["tables"]] == ["tbl_act", "tbl_act_0", "tbl_act_1", "tbl_act_2"]
    assert [t["id"] for t in p["tables"]] == [0, 1, 2, 3]
    assert [prims(j, t["actions"][0]) for t in p["tables"]] == [
        ["assign(ipv4.ttl, 0x01)"], ["assign(ipv4.ttl, 0x02)"], ["assign(ipv4.ttl, 0x03)"],
        ["assign(ipv4.ttl, 0x04)"]]
    assert p["init_table"] == "tbl_act"
    (cond,) = p["conditionals"]
    assert table(j, "tbl_act")["next_tables"] == {"act": cond["name"]}
    assert (cond["true_next"], cond["false_next"]) == ("tbl_act_0", "tbl_act_1")
    assert [a["name"] for a in j["actions"]] == ["act", "act_0", "act_1", "act_2"]


def test_sub_parser_and_parser_locals(tmp_path):
    j = build(tmp_path, program(
        meta="bit<8> count;",
        controls="""
        parser Inner(packet_in p, inout headers h, inout metadata m) {
            state start { p.extract(h.ipv4); m.count = m.count + 1; transition accept; }
        }""",
        parser_locals="Inner() inner; bit<8> depth = 3;",
        parser="""
        state start {
            pkt.extract(hdr.ethernet);
            transition select(hdr.ethernet.etherType) { 0x0800: ip; default: accept; }
        }
        state ip { meta.count = depth; inner.apply(pkt, hdr, meta); meta.count = meta.count + 2; transition accept; }
        """))
    states = {s["name"]: s for s in j["parsers"][0]["parse_states"]}
    assert states["start"]["parser_ops"][0] == {"op": "set", "parameters": [
        {"type": "field", "value": ["scalars", "depth"]}, {"type": "hexstr", "value": "0x03"}]}
    assert states["ip"]["transitions"] == [{"type": "default", "value": None, "mask": None,
                                            "next_state": "inner_start"}]
    inner = states["inner_start"]
    assert inner["parser_ops"][0] == {"op": "extract", "parameters": [{"type": "regular", "value": "ipv4"}]}
    cont = inner["transitions"][0]["next_state"]
    assert cont == "ip_cont" and states[cont]["transitions"][0]["next_state"] is None
    assert len(states[cont]["parser_ops"]) == 1  # meta.count + 2 after the sub-parser


def test_unions_and_varbit(tmp_path):
    j = build(tmp_path, program(
        top="header a_t { bit<8> x; } header b_t { bit<16> y; } header_union ab_t { a_t a; b_t b; }"
            "header opt_t { bit<8> len; varbit<320> data; }",
        headers="ethernet_t ethernet; opt_t opt; opt_t opt2; ab_t u;",
        parser="""
        state start {
            pkt.extract(hdr.ethernet);
            pkt.extract(hdr.opt, (bit<32>) hdr.opt.len * 8);
            pkt.extract(hdr.u.a);
            transition accept;
        }""",
        apply="if (hdr.u.isValid()) { hdr.u.b.setValid(); } hdr.opt2.data = hdr.opt.data;"))
    assert j["header_union_types"] == [{"name": "ab_t", "id": 0, "headers": [["a", "a_t"], ["b", "b_t"]]}]
    ids = {h["name"]: h["id"] for h in j["headers"]}
    assert j["header_unions"] == [{"name": "u", "id": 0, "union_type": "ab_t", "header_ids": [ids["u.a"], ids["u.b"]]}]
    opt_t = [t for t in j["header_types"] if t["name"] == "opt_t"][0]
    assert opt_t["fields"] == [["len", 8, False], ["data", "*"]] and opt_t["max_length"] == 41
    ops = j["parsers"][0]["parse_states"][0]["parser_ops"]
    assert ops[1]["op"] == "extract_VL"
    assert show(ops[1]["parameters"][1]) == "((opt.len * 0x00000008) & 0xffffffff)"
    assert ops[2]["parameters"] == [{"type": "regular", "value": "u.a"}]
    (cond,) = pipeline(j)["conditionals"]
    assert show(cond["expression"]) == "valid_union(u)"
    assert prims(j, table(j, cond["false_next"])["actions"][0]) == ["assign_VL(opt2.data, opt.data)"]


def test_key_names_as_p4c_makes_them(tmp_path):
    """Keys without @name are named after their source as p4c's KeyNameGenerator
    does: a mask keeps its constant in the base it is written in, isValid() is $valid$."""
    j = build(tmp_path, program(ingress="""
        table t {
            key = { hdr.ipv4.srcAddr & 0x00ff00ff: ternary; hdr.ipv4.ttl & 15: exact;
                    hdr.ipv4.isValid(): exact; hdr.ipv4.dstAddr[31:24]: exact; }
            actions = { NoAction; }
        }""", apply="t.apply();"))
    names = [k["name"] for k in table(j, "MyIngress.t")["key"]]
    assert names == ["hdr.ipv4.srcAddr & 0xff00ff", "hdr.ipv4.ttl & 15", "hdr.ipv4.$valid$", "hdr.ipv4.dstAddr[31:24]"]


def test_selector_key_without_an_action_selector_is_left_out(tmp_path):
    """p4c's back end drops a ``selector`` key from a table that has no action
    selector (p4c's issue1560): the table matches on its other keys only."""
    j = build(tmp_path, program(ingress="""
        table t {
            key = { hdr.ipv4.srcAddr: exact; hdr.ipv4.dstAddr: selector; }
            actions = { NoAction; }
        }""", apply="t.apply();"))
    t = table(j, "MyIngress.t")
    assert [k["target"] for k in t["key"]] == [["ipv4", "srcAddr"]]
    assert t["type"] == "simple" and "action_profile" not in t


def test_entry_priorities_follow_p4_rules(tmp_path):
    """Explicit priorities: the largest wins in P4, the smallest number in BMv2."""
    j = build(tmp_path, program(ingress="""
        table t {
            key = { hdr.ipv4.srcAddr: ternary; }
            actions = { NoAction; }
            entries = {
                priority = 10: 0x01 &&& 0xff: NoAction();
                0x02 &&& 0xff: NoAction();
                priority = 30: 0x03 &&& 0xff: NoAction();
            }
        }""", apply="t.apply();"))
    # P4 priorities 10, 9 (10 - 1), 30  ->  BMv2 21, 22, 1
    assert [e["priority"] for e in table(j, "MyIngress.t")["entries"]] == [21, 22, 1]


@pytest.mark.parametrize("kwargs, message", [
    (dict(top="""bit<16> twice(in bit<16> x) {
                     bit<16> r = x; for (bit<8> i = 0; i < 1; i = i + 1) { r = r + x; } return r; }""",
          parser="""state start { pkt.extract(hdr.ethernet);
                    hdr.ethernet.etherType = twice(hdr.ethernet.etherType); transition accept; }"""),
     "for loop in a function called from a parser state"),
    (dict(controls="control Dec(inout bit<8> v) { apply { v = v - 1; } }", ingress="Dec() dec;",
          apply="for (bit<16> i = 0; i < 2000; i = i + 1) { dec.apply(hdr.ipv4.ttl); }"),
     "more than 1000 iterations"),
    (dict(controls="control Dec(inout bit<8> v) { apply { v = v - 1; } }", ingress="Dec() dec;",
          apply="for (bit<8> i = 0; i < 4; i = i + 1) { dec.apply(i); }"),
     "bounds must be compile-time constants"),
    (dict(controls="control Dec(inout bit<8> v) { apply { v = v - 1; } }", ingress="Dec() dec;",
          apply="for (bit<8> i in 0..hdr.ipv4.ttl) { dec.apply(hdr.ipv4.protocol); }"),
     "range's bounds must be compile-time constants"),
    (dict(apply="for (bit<8> x in hdr.ipv4.ttl) { }"), "for-in over a value of type bit<8>"),
    (dict(ingress="""table t { key = { hdr.ipv4.dstAddr: exact; } actions = { NoAction; }
                     counters = direct_counter(CounterType.packets); }""", apply="t.apply();"),
     "must name an instance"),
    (dict(top="extern Widget { Widget(); void poke(); }", ingress="Widget() w;", apply="w.poke();"),
     "Widget"),
])
def test_unsupported_constructs_are_named_with_a_position(tmp_path, kwargs, message):
    with pytest.raises(CompileError, match=message) as info:
        build(tmp_path, program(**kwargs))
    assert info.value.kind == "unsupported"
    assert info.value.pos.line > 0 and info.value.pos.file.endswith("prog.p4")


# ------------------------------------------------------------------ copy-in/copy-out plan

@pytest.mark.parametrize("ingress, apply, copied", [
    # the callee reaches the argument only through its parameter: bound, no copy
    ("action a(inout ipv4_t x) { x.ttl = 1; }", "a(hdr.ipv4);", False),
    # the callee also reads the argument through the control's hdr: copied
    ("action a(inout ipv4_t x) { x.ttl = 1; hdr.ethernet.etherType = (bit<16>)hdr.ipv4.ttl; }",
     "a(hdr.ipv4);", True),
    # the callee touches another header of hdr only: paths do not overlap, no copy
    ("action a(inout ipv4_t x) { x.ttl = 1; hdr.ethernet.etherType = 1; }", "a(hdr.ipv4);", False),
])
def test_header_arguments_are_copied_only_where_aliasing_shows(tmp_path, ingress, apply, copied):
    j = build(tmp_path, program(ingress=ingress, apply=apply))
    ops = [p["op"] for a in j["actions"] for p in a["primitives"]]
    assert ("assign_header" in ops) == copied, ops


def test_overlap_of_access_paths():
    from p4sim.compiler.midend.copyinout import ANY, Path as AccessPath
    root, other = object(), object()
    assert AccessPath(root, ("h",)).overlaps(AccessPath(root, ("h", "a")))
    assert not AccessPath(root, ("h",)).overlaps(AccessPath(root, ("g",)))
    assert AccessPath(root, ("s", ANY)).overlaps(AccessPath(root, ("s", 1, "x")))
    assert not AccessPath(root, ("s", 0)).overlaps(AccessPath(root, ("s", 1)))
    assert not AccessPath(root, ()).overlaps(AccessPath(other, ()))
