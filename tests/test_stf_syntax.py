"""STF parsing: every command form p4c's STF files use, and located errors for bad lines."""

from __future__ import annotations

import pytest

from p4sim.stf.syntax import (
    Add,
    CheckCounter,
    CliCommand,
    Expect,
    ExpectPattern,
    Masked,
    NoPacket,
    Number,
    Packet,
    Prefix,
    Remove,
    SetDefault,
    Span,
    StfSyntaxError,
    Wait,
    parse_stf,
)


def one(text: str):
    cmds = parse_stf(text, "t.stf")
    assert len(cmds) == 1
    return cmds[0]


def test_add_with_keys_action_and_line():
    cmd = one("\n# comment\nadd MyIngress.ipv4_lpm hdr.ipv4.dstAddr:0x0a000001/32 set_nhop(port:2, mac:0x000000000102)")
    assert isinstance(cmd, Add)
    assert cmd.loc.line == 3 and str(cmd.loc) == "t.stf:3"
    assert cmd.table == "MyIngress.ipv4_lpm" and cmd.priority is None
    assert cmd.keys[0].field == "hdr.ipv4.dstAddr"
    assert cmd.keys[0].value == Prefix(0x0A000001, 32)
    assert cmd.action.name == "set_nhop"
    assert cmd.action.args == (("port", 2), ("mac", 0x102))


def test_add_priority_ternary_wildcards_and_handle_name():
    cmd = one("ADD test1 100 data.$valid$:1 data.f1:0x****0101 setb1(val:0x7f, port:2) = A")
    assert cmd.priority == 100
    assert cmd.handle_name == "A"
    f1 = cmd.keys[1].value
    assert f1 == Number(0x0101, 0x0000FFFF, 32)
    assert f1.has_wildcards
    assert cmd.keys[0].field == "data.$valid$"


def test_key_value_forms():
    cmd = one("add t a:10 b:0b1*0 c:0x0a000000&&&0xff000000 d:5->9 e:0o17 f(x:0)")
    vals = [k.value for k in cmd.keys]
    assert vals[0] == Number(10) and not vals[0].has_wildcards
    assert vals[1] == Number(0b100, 0b101, 3)
    assert vals[2] == Masked(0x0A000000, 0xFF000000)
    assert vals[3] == Span(5, 9)
    assert vals[4] == Number(0o17, 0o77, 6)


def test_quoted_names():
    cmd = one('add "MyIngress.t" "hdr.h.a":1 "MyIngress.a"(p:2)')
    assert (cmd.table, cmd.keys[0].field, cmd.action.name) == ("MyIngress.t", "hdr.h.a", "MyIngress.a")


def test_stack_element_key_names_use_brackets():
    cmd = one("add t hdr.stack$1.f:1 a()")
    assert cmd.keys[0].field == "hdr.stack[1].f"


def test_setdefault_and_keyless_action():
    cmd = one("setdefault ingress.t drop()")
    assert isinstance(cmd, SetDefault) and cmd.action.args == () and cmd.table == "ingress.t"


def test_packet_and_expect_data():
    pkt, exp, exact, anyp = parse_stf(
        "packet 0 0102 03 04\nexpect 1 01** 03 # trailing comment\nexpect 2 AABB $\nexpect 3\n"
    )
    assert pkt == Packet(pkt.loc, 0, b"\x01\x02\x03\x04")
    assert isinstance(exp, Expect) and exp.port == 1
    assert exp.pattern == ExpectPattern("01**03", False)
    assert exact.pattern == ExpectPattern("AABB", True)
    assert anyp.pattern is None and anyp.port == 3


def test_packet_with_an_odd_number_of_digits_ends_in_a_byte_of_the_last_digit():
    # p4c's runner reads the digits two at a time; a last lone digit is one byte
    first, second = parse_stf("packet 0 01 02 0\npacket 1 0a b")
    assert first.data == b"\x01\x02\x00"
    assert second.data == b"\x0a\x0b"
    assert ExpectPattern("01020").mismatch(first.data) is None


def test_expect_pattern_matching_rules():
    pat = ExpectPattern("01**03")
    assert pat.mismatch(b"\x01\xff\x03") is None
    assert pat.mismatch(b"\x01\xff\x03\x04") is None  # longer is fine without '$'
    assert "too short" in pat.mismatch(b"\x01\xff")
    assert "byte 2" in pat.mismatch(b"\x01\xff\x04")
    assert "too long" in ExpectPattern("0102", True).mismatch(b"\x01\x02\x03")


def test_check_counter_forms():
    plain, full, named = parse_stf(
        "check_counter cnt(3)\ncheck_counter ingress.c(10) bytes >= 128\ncheck_counter dc(A) packets == 2"
    )
    assert plain == CheckCounter(plain.loc, "cnt", 3, "packets", "==", 0)
    assert (full.counter, full.index, full.kind, full.op, full.value) == ("ingress.c", 10, "bytes", ">=", 128)
    assert named.index == "A"


def test_lines_as_p4c_testdata_writes_them():
    cmds = parse_stf(
        "add tab1 ethernet.dstAddr:0xa1a2a3a4a5a6 act(port:2) = A\n"
        "packet 0 a1a2a3a4a5a6 0000\n"
        "wait\n"
        "check_counter cnt($A) bytes == 12\n"
        "expect 5 0000085c0000 ffffffffffa4 ce2e\n"
    )
    assert cmds[0].handle_name == "A"
    assert cmds[1].data == bytes.fromhex("a1a2a3a4a5a60000")
    assert (cmds[3].counter, cmds[3].index, cmds[3].kind, cmds[3].value) == ("cnt", "A", "bytes", 12)
    assert cmds[4].pattern.nibbles == "0000085C0000FFFFFFFFFFA4CE2E"


def test_no_packet_wait_remove():
    nop, wait, rall, rone = parse_stf("no_packet\nwait\nremove all\nremove t 5 k:0x0a&&&0xff")
    assert isinstance(nop, NoPacket) and isinstance(wait, Wait)
    assert rall == Remove(rall.loc, None, None, ())
    assert rone.table == "t" and rone.priority == 5 and rone.keys[0].value == Masked(0x0A, 0xFF)


def test_cli_pass_through_commands():
    cmds = parse_stf(
        "mirroring_add 5 3\nmc_mgrp_create 1\nmc_node_create 0 1 2 3\nmc_node_associate 1 0\n"
        "register_write MyIngress.r 2 0x10\nregister_read r 2\ncounter_read c 0\n"
        "meter_array_set_rates m 0.5:10 1.25:20\n"
        "table_indirect_add_with_group ingress.sel 0x0a000001 5->6 => 0 7\n"
    )
    assert all(isinstance(c, CliCommand) for c in cmds)
    assert cmds[0].args == (5, 3)
    assert cmds[2].args == (0, (1, 2, 3))
    assert cmds[4].args == ("MyIngress.r", 2, 16)
    assert cmds[7].args == ("m", ((0.5, 10), (1.25, 20)))
    assert cmds[8].args == ("ingress.sel", (Number(0x0A000001, 0xFFFFFFFF, 32), Span(5, 6)), (0, 7))


@pytest.mark.parametrize(
    "text, line, col, words",
    [
        ("\n\nfrobnicate 1", 3, 1, "unknown STF command 'frobnicate'"),
        ("packet 0 01 0G", 1, 14, "invalid packet data 'G'"),
        ("packet x 00", 1, 7, "needs a port number"),
        ("expect 1 01 $ 02", 1, 15, "'$' must end"),
        ("add t k:1 act(p:1", 1, 18, "expected ',' or ')'"),
        ("add t k:1", 1, 10, "expected KEY:VALUE or ACTION"),
        ("add t k:1 a(p:0x1*)", 1, 15, "'*' digits are not allowed"),
        ("add t k:1 a(p:1, p:2)", 1, 18, "given twice"),
        ("check_counter c(1) frames == 1", 1, 20, "'packets' or 'bytes'"),
        ("wait now", 1, 6, "unexpected 'now'"),
        ("mirroring_add 1", 1, 16, "expected a number"),
        ("setdefault t a() extra", 1, 18, "unexpected 'extra'"),
    ],
)
def test_errors_name_line_column_and_problem(text, line, col, words):
    with pytest.raises(StfSyntaxError) as info:
        parse_stf(text, "bad.stf")
    err = info.value
    assert (err.loc.line, err.loc.col) == (line, col), str(err)
    assert words in err.message
    assert str(err).startswith(f"bad.stf:{line}:{col}: error: ")


def test_every_cli_command_has_a_handler_taking_its_arguments():
    import inspect

    from p4sim.stf.cli import SwitchCli
    from p4sim.stf.syntax import CLI_SIGNATURES

    for name, signature in CLI_SIGNATURES.items():
        handler = getattr(SwitchCli, "do_" + name)
        params = list(inspect.signature(handler).parameters)[1:]
        assert len(params) == len(signature), name
        assert handler.__doc__.startswith(name), name
