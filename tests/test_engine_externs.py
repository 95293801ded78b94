"""Action selectors, hash serialisation, meters and digests on a small BMv2 JSON
program written out below (same shape as p4c's output)."""

from __future__ import annotations

import zlib

import pytest

from p4sim.switch import errors, hashes
from p4sim.switch.match import Exact
from p4sim.switch.v1model import V1Switch, run_to_completion


def F(h: str, f: str) -> dict:
    return {"type": "field", "value": [h, f]}


def HEX(v: int) -> dict:
    return {"type": "hexstr", "value": hex(v)}


def RD(i: int) -> dict:
    return {"type": "runtime_data", "value": i}


def assign(dst: dict, src: dict) -> dict:
    return {"op": "assign", "parameters": [dst, src]}


STD_FIELDS = [["ingress_port", 9, False], ["egress_spec", 9, False], ["egress_port", 9, False],
              ["instance_type", 32, False], ["packet_length", 32, False],
              ["mcast_grp", 16, False], ["egress_rid", 16, False],
              ["parser_error", 32, False], ["checksum_error", 1, False]]
# h: a 12-bit and a 2-bit field (not byte aligned) + outputs
H_FIELDS = [["a", 12, False], ["b", 2, False], ["pad", 2, False], ["out16", 16, False],
            ["out32", 32, False], ["color", 8, False], ["x", 8, False]]
HASH_INPUT = [F("h", "a"), F("h", "b")]


def program() -> dict:
    calcs = [{"name": f"calc_{algo}", "id": i, "algo": algo, "input": HASH_INPUT}
             for i, algo in enumerate(["crc16", "crc32", "csum16", "xor16", "identity"])]
    hash_prims = [
        {"op": "modify_field_with_hash_based_offset",
         "parameters": [F("h", "out16"), HEX(0), {"type": "calculation", "value": "calc_crc16"}, HEX(0x10000)]},
        {"op": "modify_field_with_hash_based_offset",
         "parameters": [F("h", "out32"), HEX(0), {"type": "calculation", "value": "calc_crc32"}, HEX(0x100000000)]},
    ]
    actions = [
        {"name": "NoAction", "id": 0, "runtime_data": [], "primitives": []},
        {"name": "set_port", "id": 1, "runtime_data": [{"name": "port", "bitwidth": 9}],
         "primitives": [assign(F("standard_metadata", "egress_spec"), RD(0))]},
        {"name": "hashes", "id": 2, "runtime_data": [], "primitives": hash_prims + [
            assign(F("standard_metadata", "egress_spec"), HEX(1))]},
        {"name": "meter_it", "id": 3, "runtime_data": [], "primitives": [
            {"op": "execute_meter", "parameters": [{"type": "meter_array", "value": "mtr"},
                                                   HEX(0), F("h", "color")]},
            assign(F("standard_metadata", "egress_spec"), HEX(1))]},
        {"name": "digest_it", "id": 4, "runtime_data": [], "primitives": [
            {"op": "generate_digest", "parameters": [HEX(1), HEX(1)]},
            assign(F("standard_metadata", "egress_spec"), HEX(1))]},
        {"name": "other_hashes", "id": 5, "runtime_data": [], "primitives": [
            {"op": "modify_field_with_hash_based_offset",
             "parameters": [F("h", "out16"), HEX(0), {"type": "calculation", "value": "calc_csum16"}, HEX(0x10000)]},
            {"op": "modify_field_with_hash_based_offset",
             "parameters": [F("h", "out32"), HEX(5), {"type": "calculation", "value": "calc_xor16"}, HEX(1000)]},
            assign(F("standard_metadata", "egress_spec"), HEX(1))]},
    ]
    table = lambda tid, name, key, kind, ids, extra: {  # noqa: E731
        "name": name, "id": tid, "key": key, "match_type": "exact", "type": kind,
        "max_size": 64, "with_counters": False, "support_timeout": False, "direct_meters": None,
        "action_ids": ids, "actions": [a["name"] for a in actions if a["id"] in ids],
        "base_default_next": None, "next_tables": {a["name"]: None for a in actions if a["id"] in ids},
        **extra}
    return {
        "header_types": [
            {"name": "standard_metadata", "id": 0, "fields": STD_FIELDS},
            {"name": "h_t", "id": 1, "fields": H_FIELDS}],
        "headers": [
            {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata", "metadata": True},
            {"name": "h", "id": 1, "header_type": "h_t", "metadata": False}],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            {"name": "start", "id": 0,
             "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}],
             "transition_key": [], "transitions": [{"type": "default", "value": None, "mask": None, "next_state": None}]}]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["h"]}],
        "meter_arrays": [{"name": "mtr", "id": 0, "is_direct": False, "size": 1, "rate_count": 2, "type": "packets"}],
        "calculations": calcs,
        "learn_lists": [{"id": 1, "name": "dig_t", "elements": [F("h", "a"), F("h", "x")]}],
        "actions": actions,
        "pipelines": [
            {"name": "ingress", "id": 0, "init_table": "by_x",
             "tables": [table(0, "by_x", [{"match_type": "exact", "name": "h.x", "target": ["h", "x"], "mask": None}],
                              "simple", [0, 2, 3, 4, 5], {"next_tables": {"__HIT__": None, "__MISS__": "sel"}}),
                        table(1, "sel", [{"match_type": "exact", "name": "h.b", "target": ["h", "b"], "mask": None}],
                              "indirect_ws", [1], {"action_profile": "prof"})],
             "action_profiles": [{"name": "prof", "id": 0, "max_size": 16,
                                  "selector": {"algo": "crc16", "input": HASH_INPUT}}],
             "conditionals": []},
            {"name": "egress", "id": 1, "init_table": None, "tables": [], "conditionals": []}],
        "checksums": [],
    }


def packet(a: int, b: int, x: int = 0) -> bytes:
    return ((a << 4 | b << 2) & 0xFFFF).to_bytes(2, "big") + bytes(7) + bytes([x])


def unpack(data: bytes) -> dict:
    v = int.from_bytes(data[:10], "big")
    return {"out16": (v >> 48) & 0xFFFF, "out32": (v >> 16) & 0xFFFFFFFF,
            "color": (v >> 8) & 0xFF}


def serialised(a: int, b: int) -> bytes:
    """BMv2 BufBuilder: 12 + 2 bits back to back, MSB first, zero padded to 2 bytes."""
    return ((a << 2 | b) << 2).to_bytes(2, "big")


@pytest.fixture
def sw() -> V1Switch:
    return V1Switch(program(), clock=lambda: clock[0])


clock = [0]


def test_hash_algorithms_match_reference_values():
    assert hashes.make_hash("crc16")(b"123456789") == 0xBB3D          # CRC-16/ARC
    assert hashes.make_hash("crc32")(b"123456789") == zlib.crc32(b"123456789")
    assert hashes.make_hash("crcCCITT")(b"123456789") == 0x29B1
    assert hashes.make_hash("csum16")(bytes.fromhex("4500003c1c46400040060000ac100a63ac100a0c")) == 0xB1E6
    assert hashes.make_hash("xor16")(b"\x12\x34\x56\x78\x9a") == 0x1234 ^ 0x5678 ^ 0x9A00
    assert hashes.make_hash("identity")(b"\x01\x02\x03") == 0x010203
    assert hashes.make_hash("crc32_custom")(b"123456789") == 0xCBF43926
    with pytest.raises(errors.ProgramError, match="nope"):
        hashes.make_hash("nope")


def test_hash_inputs_are_bit_packed_and_padded_like_bmv2(sw):
    sw.table_add("by_x", "hashes", [Exact(1)], [])
    sw.table_add("by_x", "other_hashes", [Exact(2)], [])
    for a, b in ((0xABC, 2), (0x001, 1), (0xFFF, 3)):
        (_, out), = run_to_completion(sw, 0, packet(a, b, x=1))
        buf = serialised(a, b)
        crc16 = hashes.make_hash("crc16")(buf)
        assert unpack(out)["out16"] == crc16
        assert unpack(out)["out32"] == zlib.crc32(buf)
        (_, out), = run_to_completion(sw, 0, packet(a, b, x=2))
        assert unpack(out)["out16"] == hashes.csum16(buf)
        assert unpack(out)["out32"] == 5 + int.from_bytes(buf, "big") % 1000


def test_selector_picks_nth_member_of_group_by_crc16(sw):
    members = [sw.act_prof_add_member("prof", "set_port", [p]) for p in (11, 12, 13)]
    grp = sw.act_prof_create_group("prof")
    for m in members:
        sw.act_prof_add_member_to_group("prof", m, grp)
    sw.table_indirect_add_with_group("sel", [Exact(1)], grp)
    ports = set()
    for a in range(0, 4096, 97):
        (port, _), = run_to_completion(sw, 0, packet(a, 1))
        assert port == 11 + hashes.make_hash("crc16")(serialised(a, 1)) % 3
        ports.add(port)
    assert ports == {11, 12, 13}
    with pytest.raises(errors.InUse):
        sw.act_prof_delete_member("prof", members[0])
    # a member handle straight in the entry
    sw.table_indirect_add("sel", [Exact(2)], members[2])
    assert [p for p, _ in run_to_completion(sw, 0, packet(5, 2))] == [13]


def test_two_rate_three_color_meter(sw):
    sw.table_add("by_x", "meter_it", [Exact(3)], [])
    colors = lambda n: [unpack(run_to_completion(sw, 0, packet(1, 1, x=3))[0][1])["color"] for _ in range(n)]  # noqa: E731
    assert colors(3) == [0, 0, 0]                     # unconfigured: always green
    sw.meter_set_rates("mtr", 0, [(0.000001, 2), (0.000002, 4)])   # CBS 2, PBS 4 packets
    assert colors(6) == [0, 0, 1, 1, 2, 2]
    clock[0] += 1_000_000                             # one second refills one CIR token
    assert colors(2) == [0, 1]
    with pytest.raises(errors.StateError, match="increasing"):
        sw.meter_set_rates("mtr", 0, [(2.0, 1), (1.0, 1)])


def test_digest_values_are_taken_at_end_of_ingress(sw):
    sw.table_add("by_x", "digest_it", [Exact(4)], [])
    run_to_completion(sw, 0, packet(0x123, 0, x=4))
    run_to_completion(sw, 0, packet(0x456, 0, x=4))
    assert sw.pop_digests() == [("dig_t", [(0x123, 4), (0x456, 4)])]
    assert sw.pop_digests() == []


def test_crc_parameters_can_be_changed():
    crc = hashes.make_hash("crc16_custom")
    crc.set_parameters(0x1021, 0xFFFF, 0, False, False)
    assert crc(b"123456789") == 0x29B1


def test_indirect_defaults_and_empty_groups_follow_bmv2(sw):
    m0 = sw.act_prof_add_member("prof", "set_port", [21])
    m1 = sw.act_prof_add_member("prof", "set_port", [22])
    grp = sw.act_prof_create_group("prof")
    with pytest.raises(errors.StateError, match="empty"):
        sw.table_indirect_add_with_group("sel", [Exact(1)], grp)
    assert run_to_completion(sw, 0, packet(1, 1)) == [(0, packet(1, 1))]   # miss, no default: no-op
    sw.table_indirect_set_default("sel", m0)
    assert [p for p, _ in run_to_completion(sw, 0, packet(1, 1))] == [21]
    with pytest.raises(errors.InUse):
        sw.act_prof_delete_member("prof", m0)                  # held by the default entry
    sw.act_prof_add_member_to_group("prof", m1, grp)
    sw.table_indirect_add_with_group("sel", [Exact(1)], grp)
    assert [p for p, _ in run_to_completion(sw, 0, packet(1, 1))] == [22]
    sw.act_prof_remove_member_from_group("prof", m1, grp)      # group now empty:
    assert [p for p, _ in run_to_completion(sw, 0, packet(1, 1))] == [0]   # the hit runs no action
    sw.table_reset_default("sel")
    sw.act_prof_delete_member("prof", m0)


def test_value_set_pads_each_key_field_to_bytes_like_bmv2():
    from p4sim.switch.externs import ValueSet
    vs = ValueSet("pvs", 12, [4, 8])           # key: a 4-bit then an 8-bit field
    vs.add(0xABC, None)                        # compressed: 0xA then 0xBC
    assert vs.match(0x0ABC) and not vs.match(0xABC0)
    assert vs.match_masked(0x0AFF, 0x0F00)     # transition mask keeps only field 1
    assert not vs.match_masked(0x0BBC, 0x0F00)
    vs.add(0x100, 0xF00)                       # value with its own mask: field 1 == 1
    assert vs.match(0x01EE)
    with pytest.raises(errors.BadMatch):
        vs.add(0x1000, None)


def test_csum16_equals_the_word_by_word_ones_complement_sum():
    import random as rnd
    gen = rnd.Random(7)

    def reference(data: bytes) -> int:
        if len(data) % 2:
            data += b"\x00"
        total = 0
        for i in range(0, len(data), 2):
            total += (data[i] << 8) | data[i + 1]
            total = (total & 0xFFFF) + (total >> 16)
        return ~total & 0xFFFF

    cases = [b"", b"\x00\x00", b"\xff\xff", b"\xff\xff\xff\xff", b"\x01"]
    cases += [bytes(gen.randrange(256) for _ in range(gen.randrange(1, 60))) for _ in range(200)]
    for data in cases:
        assert hashes.csum16(data) == reference(data), data.hex()


def test_random_is_uniform_on_its_closed_range():
    """v1model random(lo, hi): every value of [lo, hi] comes out, nothing outside; an
    empty range gives lo; a span wider than a float's mantissa still works."""
    import random as rnd

    from p4sim.switch import phv

    rnd.seed(11)
    seen = [phv.rng(3, 10) for _ in range(4000)]
    assert set(seen) == set(range(3, 11))
    counts = [seen.count(v) for v in range(3, 11)]
    assert min(counts) > 400 and max(counts) < 600  # 500 expected each
    assert phv.rng(9, 2) == 9 and phv.rng(5, 5) == 5
    wide = [phv.rng(0, (1 << 64) - 1) for _ in range(50)]
    assert all(0 <= v < 1 << 64 for v in wide) and len(set(wide)) == 50
