"""Parser and expression semantics on a small program written out below in p4c's
BMv2 JSON shape: lookahead, value sets, advance, verify, varbit, header unions,
signed arithmetic and saturating casts, action-local jumps, exit, truncate and a
checksum over fields plus payload.

Wire format: base {kind:8, n:8, ck:16} then, chosen by a lookahead on the next byte:
0x01 opt {len:8, data:varbit (n bytes)}, 0x02 un.a {a:8}, 0x03 un.b {b:16}, a value
set match (skip 2 bytes); anything else: `verify(base.n != 0xEE, MyErr)`.
Ingress validates `out` {sv:int<8>, r:16, u:8, ce:8, pe:8, j:8},
deparsed right after base.
"""

from __future__ import annotations

import struct

import pytest

from p4sim.switch import hashes
from p4sim.switch.v1model import V1Switch, run_to_completion


def F(h: str, f: str) -> dict:
    return {"type": "field", "value": [h, f]}


def HEX(v: int) -> dict:
    return {"type": "hexstr", "value": hex(v)}


def EXPR(op: str, left, right, **extra) -> dict:
    return {"type": "expression", "value": {"op": op, "left": left, "right": right, **extra}}


def assign(dst: dict, src: dict) -> dict:
    return {"op": "assign", "parameters": [dst, src]}


def hdr(name: str) -> dict:
    return {"type": "header", "value": name}


def tbl(tid: int, name: str, action_id: int, action: str, nxt: str | None) -> dict:
    return {"name": name, "id": tid, "key": [], "match_type": "exact", "type": "simple",
            "max_size": 1, "with_counters": False, "support_timeout": False,
            "direct_meters": None, "action_ids": [action_id], "actions": [action],
            "base_default_next": nxt, "next_tables": {action: nxt},
            "default_entry": {"action_id": action_id, "action_const": True,
                              "action_data": [], "action_entry_const": True}}


def state(sid: int, name: str, ops: list, key: list, transitions: list) -> dict:
    return {"name": name, "id": sid, "parser_ops": ops, "transition_key": key,
            "transitions": transitions}


def to(kind: str, value, nxt: str | None, mask=None) -> dict:
    return {"type": kind, "value": value, "mask": mask, "next_state": nxt}


def extract(name: str) -> dict:
    return {"op": "extract", "parameters": [{"type": "regular", "value": name}]}


STD = [["ingress_port", 9, False], ["egress_spec", 9, False], ["egress_port", 9, False],
       ["instance_type", 32, False], ["packet_length", 32, False], ["mcast_grp", 16, False],
       ["egress_rid", 16, False], ["checksum_error", 1, False], ["parser_error", 32, False],
       ["_padding", 4, False]]


def program() -> dict:
    actions = [
        {"name": "arith", "id": 0, "runtime_data": [], "primitives": [
            {"op": "add_header", "parameters": [hdr("out")]},
            assign(F("out", "sv"), EXPR("two_comp_mod", F("base", "n"), HEX(8))),
            assign(F("out", "r"), EXPR("&", EXPR(">>", F("out", "sv"), HEX(1)), HEX(0xFFFF))),
            assign(F("out", "u"), EXPR("usat_cast", EXPR("+", F("base", "n"), HEX(200)), HEX(8))),
            assign(F("out", "ce"), EXPR("&", F("standard_metadata", "checksum_error"), HEX(0xFF))),
            assign(F("out", "pe"), EXPR("&", F("standard_metadata", "parser_error"), HEX(0xFF))),
            {"op": "log_msg", "parameters": [{"type": "string", "value": "n={}"},
                                              {"type": "parameters_vector", "value": [F("base", "n")]}]}]},
        {"name": "flip", "id": 1, "runtime_data": [], "primitives": [
            {"op": "add_header", "parameters": [hdr("un.b")]},
            assign(F("un.b", "b"), HEX(0xBEEF))]},
        {"name": "jumpy", "id": 2, "runtime_data": [], "primitives": [
            {"op": "_jump_if_zero", "parameters": [
                EXPR("b2d", None, EXPR("==", F("base", "n"), HEX(5))), HEX(3)]},
            assign(F("out", "j"), HEX(0xAA)),
            {"op": "_jump", "parameters": [HEX(5)]},
            assign(F("out", "j"), HEX(0xBB)),
            {"op": "exit", "parameters": []},
            assign(F("out", "j"), EXPR("&", EXPR("+", F("out", "j"), HEX(1)), HEX(0xFF)))]},
        {"name": "trunc", "id": 3, "runtime_data": [], "primitives": [
            {"op": "truncate", "parameters": [HEX(8)]},
            assign(F("standard_metadata", "egress_spec"), HEX(9))]},
        {"name": "port", "id": 4, "runtime_data": [], "primitives": [
            assign(F("standard_metadata", "egress_spec"), HEX(9))]},
    ]
    states = [
        state(0, "start", [extract("base")], [{"type": "lookahead", "value": [0, 8]}], [
            to("hexstr", "0x01", "parse_opt"), to("hexstr", "0x02", "parse_a"),
            to("hexstr", "0x03", "parse_b"), to("parse_vset", "pvs", "parse_vs"),
            to("default", None, "check")]),
        state(1, "parse_opt", [{"op": "extract_VL", "parameters": [
            {"type": "regular", "value": "opt"},
            EXPR("&", EXPR("<<", F("base", "n"), HEX(3)), HEX(0xFFFFFFFF))]}], [], [to("default", None, None)]),
        state(2, "parse_a", [extract("un.a")], [], [to("default", None, None)]),
        state(3, "parse_b", [extract("un.b")], [], [to("default", None, None)]),
        state(4, "parse_vs", [{"op": "advance", "parameters": [HEX(16)]}], [], [to("default", None, None)]),
        state(5, "check", [{"op": "verify", "parameters": [
            EXPR("!=", F("base", "n"), HEX(0xEE)), HEX(7)]}], [], [to("default", None, None)]),
    ]
    return {
        "header_types": [
            {"name": "standard_metadata", "id": 0, "fields": STD},
            {"name": "base_t", "id": 1, "fields": [["kind", 8, False], ["n", 8, False], ["ck", 16, False]]},
            {"name": "out_t", "id": 2, "fields": [["sv", 8, True], ["r", 16, False], ["u", 8, False],
                                                   ["ce", 8, False], ["pe", 8, False], ["j", 8, False]]},
            {"name": "opt_t", "id": 3, "fields": [["len", 8, False], ["data", "*"]], "max_length": 5},
            {"name": "a_t", "id": 4, "fields": [["a", 8, False]]},
            {"name": "b_t", "id": 5, "fields": [["b", 16, False]]}],
        "headers": [
            {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata", "metadata": True},
            {"name": "base", "id": 1, "header_type": "base_t", "metadata": False},
            {"name": "out", "id": 2, "header_type": "out_t", "metadata": False},
            {"name": "opt", "id": 3, "header_type": "opt_t", "metadata": False},
            {"name": "un.a", "id": 4, "header_type": "a_t", "metadata": False},
            {"name": "un.b", "id": 5, "header_type": "b_t", "metadata": False}],
        "header_union_types": [{"name": "un_t", "id": 0, "headers": [["a", "a_t"], ["b", "b_t"]]}],
        "header_unions": [{"name": "un", "id": 0, "union_type": "un_t", "header_ids": [4, 5]}],
        "errors": [["NoError", 0], ["PacketTooShort", 1], ["NoMatch", 2], ["StackOutOfBounds", 3],
                   ["HeaderTooShort", 4], ["ParserTimeout", 5], ["ParserInvalidArgument", 6],
                   ["MyErr", 7]],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": states}],
        "parse_vsets": [{"name": "pvs", "id": 0, "compressed_bitwidth": 8}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["base", "out", "opt", "un.a", "un.b"]}],
        "calculations": [{"name": "calc", "id": 0, "algo": "csum16", "input": [
            F("base", "kind"), F("base", "n"), {"type": "payload", "value": None}]}],
        "checksums": [{"name": "ck", "id": 0, "target": ["base", "ck"], "type": "generic",
                       "calculation": "calc", "verify": True, "update": False, "if_cond": None}],
        "actions": actions,
        "pipelines": [
            {"name": "ingress", "id": 0, "init_table": "tbl_arith", "action_profiles": [],
             "tables": [tbl(0, "tbl_arith", 0, "arith", "node_union"),
                        tbl(1, "tbl_flip", 1, "flip", "tbl_jump"),
                        tbl(2, "tbl_jump", 2, "jumpy", "node_trunc"),
                        tbl(3, "tbl_trunc", 3, "trunc", None),
                        tbl(4, "tbl_port", 4, "port", None)],
             "conditionals": [
                {"name": "node_union", "id": 0, "expression": EXPR("valid", None, hdr("un.a")),
                 "true_next": "tbl_flip", "false_next": "tbl_jump"},
                {"name": "node_trunc", "id": 1, "expression": EXPR("==", F("base", "kind"), HEX(0x54)),
                 "true_next": "tbl_trunc", "false_next": "tbl_port"}]},
            {"name": "egress", "id": 1, "init_table": None, "tables": [], "conditionals": []}],
    }


def base(kind: int, n: int, rest: bytes = b"", ck: int | None = None) -> bytes:
    if ck is None:
        ck = hashes.csum16(bytes([kind, n]) + rest)
    return struct.pack("!BBH", kind, n, ck) + rest


def out_of(data: bytes) -> dict:
    sv, r, u, ce, pe, j = struct.unpack("!bHBBBB", data[4:11])
    return {"sv": sv, "r": r, "u": u, "ce": ce, "pe": pe, "j": j}


@pytest.fixture
def sw() -> V1Switch:
    return V1Switch(program())


def test_signed_shift_and_saturating_cast(sw):
    (port, out), = run_to_completion(sw, 0, base(0, 0x80, b"\x09"))
    o = out_of(out)
    assert o["sv"] == -128 and o["r"] == 0xFFC0 and o["u"] == 255   # min(0x80 + 200, 255)
    (port, out), = run_to_completion(sw, 0, base(0, 5, b"\x09"))
    assert out_of(out)["sv"] == 5 and out_of(out)["r"] == 2 and out_of(out)["u"] == 205


def test_action_jumps_and_exit(sw):
    (port, out), = run_to_completion(sw, 0, base(0, 5, b"\x09"))
    assert port == 9 and out_of(out)["j"] == 0xAB
    # exit: as in BMv2 the action runs to its end (j + 1), then the rest of the
    # pipeline (tbl_port) is skipped
    (port, out), = run_to_completion(sw, 0, base(0, 6, b"\x09"))
    assert port == 0 and out_of(out)["j"] == 0xBC


def test_varbit_extract_and_deparse(sw):
    data = base(0, 3, b"\x01" + b"\x01XYZ" + b"tail")     # opt.len=1, 3 varbit bytes
    (_port, out), = run_to_completion(sw, 0, data)
    assert out[:4] == data[:4] and out[11:] == data[4:]
    # varbit wider than max_length (5 bytes incl. len): HeaderTooShort (4)
    (_port, out), = run_to_completion(sw, 0, base(0, 5, b"\x01" + b"\x01ABCDE"))
    assert out_of(out)["pe"] == 4


def test_union_member_extract_and_set_valid_invalidates_sibling(sw):
    (_port, out), = run_to_completion(sw, 0, base(0, 5, b"\x02" + b"pp"))
    # un.a (the looked-ahead 0x02) was parsed; the action made un.b valid, so un.a
    # is no longer emitted
    assert out[11:] == b"\xbe\xef" + b"pp"


def test_value_set_match_and_advance_drops_skipped_bytes(sw):
    data = base(0, 5, b"\x42\x43" + b"rest")
    (_port, out), = run_to_completion(sw, 0, data)
    assert out[11:] == data[4:]                           # no value yet: nothing skipped
    sw.parser_value_set_add("pvs", 0x42)
    (_port, out), = run_to_completion(sw, 0, data)
    assert out[11:] == b"rest"                            # the 2 advanced bytes are gone
    sw.parser_value_set_clear("pvs")
    (_port, out), = run_to_completion(sw, 0, data)
    assert out[11:] == data[4:]


def test_verify_raises_user_error_and_lookahead_past_end(sw):
    (_port, out), = run_to_completion(sw, 0, base(0, 0xEE, b"\x09"))
    assert out_of(out)["pe"] == 7
    (_port, out), = run_to_completion(sw, 0, base(0, 1))             # lookahead beyond the packet
    assert out_of(out)["pe"] == 0


def test_checksum_over_fields_and_payload_sets_checksum_error(sw):
    (_port, out), = run_to_completion(sw, 0, base(0, 5, b"\x09abc"))
    assert out_of(out)["ce"] == 0
    (_port, out), = run_to_completion(sw, 0, base(0, 5, b"\x09abc", ck=0x1234))
    assert out_of(out)["ce"] == 1


def test_truncate_cuts_the_packet_on_output(sw):
    (port, out), = run_to_completion(sw, 0, base(0x54, 5, b"\x09" + b"x" * 30))
    assert port == 9 and len(out) == 8


def test_log_msg_formats_its_arguments(sw, caplog):
    with caplog.at_level("INFO", logger="p4sim.switch.log_msg"):
        run_to_completion(sw, 0, base(0, 5, b"\x09"))
    assert "n=5" in caplog.text


@pytest.mark.parametrize("mutate, words", [
    (lambda p: p["actions"][4]["primitives"].append({"op": "_Foo_bar", "parameters": []}), "_Foo_bar"),
    (lambda p: p["actions"][4]["primitives"].append(assign(F("base", "nope"), HEX(1))), "nope"),
    (lambda p: p["pipelines"].pop(), "egress"),
    (lambda p: p["calculations"][0].update(algo="md5"), "md5"),
    (lambda p: p["parsers"][0]["parse_states"][0]["transitions"].insert(
        0, to("hexstr", "0x09", "nowhere")), "nowhere"),
    (lambda p: p.pop("parsers"), "parser"),
])
def test_unloadable_programs_raise_program_error_naming_the_problem(mutate, words):
    from p4sim.switch.errors import ProgramError
    prog = program()
    mutate(prog)
    with pytest.raises(ProgramError, match=words):
        V1Switch(prog)


def union_stack_program() -> dict:
    """Header-union stack `us[2]` of {a: {x:8}, b: {y:16}}, parsed by a lookahead
    loop (0x0A: member a, 0x0B: member b); ingress sends parser errors to port 2."""
    def ustate(sid: int, name: str, member: str, key: list, trans: list) -> dict:
        return state(sid, name, [{"op": "extract", "parameters": [
            {"type": "union_stack", "value": ["us", member]}]}], key, trans)
    return {
        "header_types": [
            {"name": "standard_metadata", "id": 0, "fields": STD},
            {"name": "a_t", "id": 1, "fields": [["x", 8, False]]},
            {"name": "b_t", "id": 2, "fields": [["y", 16, False]]}],
        "headers": [
            {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata", "metadata": True},
            {"name": "us[0].a", "id": 1, "header_type": "a_t", "metadata": False},
            {"name": "us[0].b", "id": 2, "header_type": "b_t", "metadata": False},
            {"name": "us[1].a", "id": 3, "header_type": "a_t", "metadata": False},
            {"name": "us[1].b", "id": 4, "header_type": "b_t", "metadata": False}],
        "header_union_types": [{"name": "u_t", "id": 0, "headers": [["a", "a_t"], ["b", "b_t"]]}],
        "header_unions": [
            {"name": "us[0]", "id": 0, "union_type": "u_t", "header_ids": [1, 2]},
            {"name": "us[1]", "id": 1, "union_type": "u_t", "header_ids": [3, 4]}],
        "header_union_stacks": [{"name": "us", "id": 0, "union_type": "u_t", "header_union_ids": [0, 1]}],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            state(0, "start", [], [{"type": "lookahead", "value": [0, 8]}], [
                to("hexstr", "0x0a", "pa"), to("hexstr", "0x0b", "pb"), to("default", None, None)]),
            ustate(1, "pa", "a", [{"type": "union_stack_field", "value": ["us", "a", "x"]}], [
                to("hexstr", "0x0a", "start"), to("default", None, None)]),
            ustate(2, "pb", "b", [], [to("default", None, "start")])]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["us[0].a", "us[0].b", "us[1].a", "us[1].b"]}],
        "actions": [{"name": "out", "id": 0, "runtime_data": [{"name": "p", "bitwidth": 9}], "primitives": [
            assign(F("standard_metadata", "egress_spec"), {"type": "runtime_data", "value": 0})]}],
        "pipelines": [
            {"name": "ingress", "id": 0, "init_table": "node_err", "tables": [
                {**tbl(0, "to1", 0, "out", None), "default_entry": {"action_id": 0, "action_data": ["0x1"]}},
                {**tbl(1, "to2", 0, "out", None), "default_entry": {"action_id": 0, "action_data": ["0x2"]}}],
             "conditionals": [{"name": "node_err", "id": 0,
                               "expression": EXPR("!=", F("standard_metadata", "parser_error"), HEX(0)),
                               "true_next": "to2", "false_next": "to1"}]},
            {"name": "egress", "id": 1, "init_table": None, "tables": [], "conditionals": []}],
    }


def test_header_union_stack_extract_and_union_stack_field_key():
    sw = V1Switch(union_stack_program())
    data = bytes.fromhex("0a0b77ff")          # us[0].a.x = 0a, us[1].b.y = 0b77, payload ff
    assert run_to_completion(sw, 0, data) == [(1, data)]
    (port, _out), = run_to_completion(sw, 0, bytes.fromhex("0a0a0a"))   # a third union: out of bounds
    assert port == 2


def test_long_parser_chains_compile_and_run():
    # 120 one-byte headers in a chain of select states: more than Python's nesting
    # limit if every state were inlined into its predecessor
    n = 120
    prog = union_stack_program()
    prog["header_types"].append({"name": "c_t", "id": 9, "fields": [["v", 8, False]]})
    prog["headers"] += [{"name": f"c{i}", "id": 10 + i, "header_type": "c_t", "metadata": False}
                        for i in range(n)]
    prog["parsers"][0]["parse_states"] = [
        state(100 + i, f"s{i}", [extract(f"c{i}")], [{"type": "field", "value": [f"c{i}", "v"]}],
              [to("hexstr", "0x01", f"s{i + 1}" if i + 1 < n else None), to("default", None, None)])
        for i in range(n)]
    prog["parsers"][0]["init_state"] = "s0"
    prog["deparsers"][0]["order"] = [f"c{i}" for i in range(n)]
    sw = V1Switch(prog)
    data = b"\x01" * n + b"tail"
    assert run_to_completion(sw, 0, data) == [(1, data)]
    (port, _), = run_to_completion(sw, 0, b"\x01" * 10)                  # runs out: PacketTooShort
    assert port == 2


def test_header_union_stack_push_front_moves_whole_unions():
    prog = union_stack_program()
    prog["actions"][0]["primitives"][:0] = [
        {"op": "push", "parameters": [{"type": "header_union_stack", "value": "us"}, HEX(1)]},
        {"op": "add_header", "parameters": [hdr("us[0].a")]},
        assign(F("us[0].a", "x"), HEX(0x99))]
    sw = V1Switch(prog)
    # parsed: us[0] = a(0a), us[1] = b(0b77); after push: us[0] = a(99), us[1] = a(0a)
    assert run_to_completion(sw, 0, bytes.fromhex("0a0b77ff")) == [(1, bytes.fromhex("990aff"))]
