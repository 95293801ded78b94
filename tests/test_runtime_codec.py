"""P4Runtime server pieces that need no engine: schema, codec, arbitration, digest batching."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.protobuf import any_pb2, text_format

from finsy.proto import stratum
from p4sim.proto import p4i, p4r, rpc_code
from p4sim.runtime import codec
from p4sim.runtime.arbitration import Arbitrator, Controller
from p4sim.runtime.digests import DigestBatcher
from p4sim.runtime.errors import P4RuntimeError
from p4sim.runtime.schema import Schema

FIXTURES = Path(__file__).parent / "runtime_fixtures"


@pytest.fixture(scope="module")
def schema() -> Schema:
    info = text_format.Parse((FIXTURES / "small.p4info.txtpb").read_text(), p4i.P4Info())
    return Schema(info)


def fm_lpm(value: bytes, plen: int, field_id: int = 1) -> p4r.FieldMatch:
    return p4r.FieldMatch(field_id=field_id, lpm=p4r.FieldMatch.LPM(value=value, prefix_len=plen))


def code_of(exc: pytest.ExceptionInfo) -> grpc.StatusCode:
    assert isinstance(exc.value, P4RuntimeError)
    return exc.value.code


# -- binary strings -------------------------------------------------------------------------


@pytest.mark.parametrize("value,encoded", [(0, b"\x00"), (1, b"\x01"), (255, b"\xff"), (256, b"\x01\x00"), (0x0A000001, b"\x0a\x00\x00\x01")])
def test_int_to_bytes_is_shortest(value: int, encoded: bytes) -> None:
    assert codec.int_to_bytes(value) == encoded


def test_bytes_to_int_accepts_leading_zeros_but_not_too_wide_values() -> None:
    assert codec.bytes_to_int(b"\x00\x00\x01\xff", 9, "x") == 0x1FF
    with pytest.raises(P4RuntimeError, match="too wide for bitwidth 9") as exc:
        codec.bytes_to_int(b"\x02\x00", 9, "x")
    assert code_of(exc) == grpc.StatusCode.OUT_OF_RANGE  # the spec's code for a rejected binary string
    with pytest.raises(P4RuntimeError, match="empty byte string") as exc:
        codec.bytes_to_int(b"", 9, "x")
    assert code_of(exc) == grpc.StatusCode.OUT_OF_RANGE


def test_pack_and_unpack_controller_header_fields() -> None:
    data = codec.pack_fields([5, 0], [9, 7])
    assert data == bytes([0x02, 0x80])  # 9-bit 5 = 0b000000101, then 7 zero bits
    assert codec.unpack_fields(data + b"payload", [9, 7]) == [5, 0]


# -- schema ---------------------------------------------------------------------------------


def test_schema_finds_objects_by_id_and_name(schema: Schema) -> None:
    lpm = schema.tables.by_name("MyIngress.ipv4_lpm")
    assert schema.tables.get(lpm.id) is lpm
    assert lpm.direct_counter_id == schema.direct_counters.by_name("MyIngress.lpm_hits").id
    assert not lpm.needs_priority and schema.tables.by_name("MyIngress.acl").needs_priority
    assert schema.packet_out().fields[0].name == "egress_port"
    assert schema.digests.by_name("learn_t").member_widths == (48, 9)
    with pytest.raises(P4RuntimeError, match="unknown table id 7") as exc:
        schema.tables.get(7)
    assert code_of(exc) == grpc.StatusCode.INVALID_ARGUMENT


def test_schema_rejects_dangling_references() -> None:
    info = text_format.Parse((FIXTURES / "small.p4info.txtpb").read_text(), p4i.P4Info())
    info.tables[0].action_refs.add(id=0x01ABCDEF)
    with pytest.raises(P4RuntimeError, match="refers to unknown action id"):
        Schema(info)


# -- match keys -----------------------------------------------------------------------------


def test_lpm_canonical_round_trip(schema: Schema) -> None:
    table = schema.tables.by_name("MyIngress.ipv4_lpm")
    key = codec.decode_match(table, [fm_lpm(b"\x00\x0a\x01\x00\x00", 16)])
    assert key[0].a == 0x0A010000 and key[0].b == 16
    (out,) = codec.encode_match(table, key)
    assert out.lpm.value == b"\x0a\x01\x00\x00" and out.lpm.prefix_len == 16


@pytest.mark.parametrize(
    "fm,message,code",
    [
        (fm_lpm(b"\x0a\x01\x00\x01", 16), "bits set past prefix length 16", grpc.StatusCode.INVALID_ARGUMENT),
        (fm_lpm(b"\x0a\x00\x00\x00", 33), "bad prefix length 33", grpc.StatusCode.INVALID_ARGUMENT),
        (fm_lpm(b"\x00", 0), "must be omitted", grpc.StatusCode.INVALID_ARGUMENT),
        (fm_lpm(b"\x01\x0a\x00\x00\x00", 8), "too wide for bitwidth 32", grpc.StatusCode.OUT_OF_RANGE),
        (p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=b"\x01")), "field is lpm but the request gives exact",
         grpc.StatusCode.INVALID_ARGUMENT),
        (fm_lpm(b"\x0a\x00\x00\x00", 8, field_id=9), "has no match field id 9", grpc.StatusCode.INVALID_ARGUMENT),
    ],
)
def test_bad_lpm_matches_are_rejected(schema: Schema, fm: p4r.FieldMatch, message: str, code: grpc.StatusCode) -> None:
    table = schema.tables.by_name("MyIngress.ipv4_lpm")
    with pytest.raises(P4RuntimeError, match=message) as exc:
        codec.decode_match(table, [fm])
    assert code_of(exc) == code


def test_ternary_optional_range_and_dont_care(schema: Schema) -> None:
    acl = schema.tables.by_name("MyIngress.acl")
    key = codec.decode_match(acl, [])
    assert [(v.a, v.b, v.wildcard) for v in key] == [(0, 0, False), (0, 0, True), (0, 511, False)]
    assert codec.encode_match(acl, key) == []  # every don't-care is omitted on Read
    tern = p4r.FieldMatch(field_id=1, ternary=p4r.FieldMatch.Ternary(value=b"\x0a\x00\x00\x00", mask=b"\xff\x00\x00\x00"))
    opt = p4r.FieldMatch(field_id=2, optional=p4r.FieldMatch.Optional(value=b"\x11"))
    rng = p4r.FieldMatch(field_id=3, range=p4r.FieldMatch.Range(low=b"\x00\x01", high=b"\x04"))
    key = codec.decode_match(acl, [rng, tern, opt])
    assert [(v.a, v.b) for v in key] == [(0x0A000000, 0xFF000000), (0x11, 0), (1, 4)]
    out = codec.encode_match(acl, key)
    assert [f.field_id for f in out] == [1, 2, 3] and out[2].range.low == b"\x01"


@pytest.mark.parametrize(
    "fm,message",
    [
        (p4r.FieldMatch(field_id=1, ternary=p4r.FieldMatch.Ternary(value=b"\x0a\x00\x00\x01", mask=b"\xff\x00\x00\x00")), "bits outside mask"),
        (p4r.FieldMatch(field_id=1, ternary=p4r.FieldMatch.Ternary(value=b"\x00", mask=b"\x00")), "mask 0"),
        (p4r.FieldMatch(field_id=3, range=p4r.FieldMatch.Range(low=b"\x05", high=b"\x04")), "above high"),
        (p4r.FieldMatch(field_id=3, range=p4r.FieldMatch.Range(low=b"\x00", high=b"\x01\xff")), "whole range"),
    ],
)
def test_bad_acl_matches_are_rejected(schema: Schema, fm: p4r.FieldMatch, message: str) -> None:
    with pytest.raises(P4RuntimeError, match=message):
        codec.decode_match(schema.tables.by_name("MyIngress.acl"), [fm])


def test_exact_fields_are_mandatory_and_priorities_follow_match_kinds(schema: Schema) -> None:
    with pytest.raises(P4RuntimeError, match="missing mandatory match field"):
        codec.decode_match(schema.tables.by_name("MyIngress.ecmp"), [])
    with pytest.raises(P4RuntimeError, match="need a priority > 0"):
        codec.check_priority(schema.tables.by_name("MyIngress.acl"), 0)
    with pytest.raises(P4RuntimeError, match="priority must be unset"):
        codec.check_priority(schema.tables.by_name("MyIngress.ipv4_lpm"), 10)


def test_action_parameters_are_checked(schema: Schema) -> None:
    table = schema.tables.by_name("MyIngress.ipv4_lpm")
    set_nhop = schema.actions.by_name("MyIngress.set_nhop")
    good = p4r.Action(action_id=set_nhop.id, params=[p4r.Action.Param(param_id=2, value=b"\x01"),
                                                       p4r.Action.Param(param_id=1, value=b"\x00\x00\x00\x00\x00\x00\x0b")])
    info, args = codec.decode_action(schema, good, table.entry_action_ids, "t")
    assert info is set_nhop and args == [0x0B, 1]
    assert codec.encode_action(info, args).params[0].value == b"\x0b"
    missing = p4r.Action(action_id=set_nhop.id, params=[p4r.Action.Param(param_id=1, value=b"\x01")])
    with pytest.raises(P4RuntimeError, match="missing parameter 'port'"):
        codec.decode_action(schema, missing, table.entry_action_ids, "t")
    mirror = schema.actions.by_name("MyIngress.mirror")
    with pytest.raises(P4RuntimeError, match="'MyIngress.mirror' is not allowed"):
        codec.decode_action(schema, p4r.Action(action_id=mirror.id), table.entry_action_ids, "t")


# -- arbitration ----------------------------------------------------------------------------


def arbitration(election_id: int | None, role: str = "", device_id: int = 1, config: any_pb2.Any | None = None):
    msg = p4r.MasterArbitrationUpdate(device_id=device_id)
    if role or config is not None:
        msg.role.name = role
        if config is not None:
            msg.role.config.CopyFrom(config)
    if election_id is not None:
        msg.election_id.low = election_id
    return msg


def new_controller() -> tuple[Controller, list[p4r.StreamMessageResponse]]:
    inbox: list[p4r.StreamMessageResponse] = []
    return Controller(send=inbox.append), inbox


def last_status(inbox: list[p4r.StreamMessageResponse]) -> tuple[int, int]:
    upd = inbox[-1].arbitration
    return upd.status.code, upd.election_id.low


def test_primary_backup_and_notifications() -> None:
    arb = Arbitrator(device_id=1)
    a, a_in = new_controller()
    b, b_in = new_controller()
    arb.update(a, arbitration(5))
    assert last_status(a_in) == (rpc_code.OK, 5)
    arb.update(b, arbitration(3))  # a backup: only b hears about it
    assert last_status(b_in) == (rpc_code.ALREADY_EXISTS, 5) and len(a_in) == 1
    arb.check_primary(1, "", p4r.Uint128(low=5))
    with pytest.raises(P4RuntimeError, match="not primary") as exc:
        arb.check_primary(1, "", p4r.Uint128(low=3))
    assert code_of(exc) == grpc.StatusCode.PERMISSION_DENIED
    arb.update(b, arbitration(7))  # b takes over: everybody is told
    assert last_status(b_in) == (rpc_code.OK, 7) and last_status(a_in) == (rpc_code.ALREADY_EXISTS, 7)
    arb.remove(b)  # the primary leaves: no primary, the highest id stays 7
    assert last_status(a_in) == (rpc_code.NOT_FOUND, 7)
    arb.update(a, arbitration(6))  # below the highest ever seen: still no primary
    assert last_status(a_in) == (rpc_code.NOT_FOUND, 7)
    arb.update(a, arbitration(7))
    assert last_status(a_in) == (rpc_code.OK, 7)


def test_arbitration_errors() -> None:
    arb = Arbitrator(device_id=1)
    a, _ = new_controller()
    b, _ = new_controller()
    arb.update(a, arbitration(5))
    with pytest.raises(P4RuntimeError, match="election id 5 is already used") as exc:
        arb.update(b, arbitration(5))
    assert code_of(exc) == grpc.StatusCode.INVALID_ARGUMENT
    c, _ = new_controller()
    with pytest.raises(P4RuntimeError, match="device id 9 not found") as exc:
        arb.update(c, arbitration(1, device_id=9))
    assert code_of(exc) == grpc.StatusCode.NOT_FOUND
    with pytest.raises(P4RuntimeError, match="does not match this stream's role") as exc:
        arb.update(a, arbitration(5, role="other"))
    assert code_of(exc) == grpc.StatusCode.FAILED_PRECONDITION
    bogus = any_pb2.Any()
    bogus.Pack(p4r.Uint128(low=1))
    with pytest.raises(P4RuntimeError, match="unsupported role config type"):
        arb.update(c, arbitration(1, role="r", config=bogus))


def test_roles_have_independent_primaries_and_policies() -> None:
    arb = Arbitrator(device_id=1)
    a, a_in = new_controller()
    b, b_in = new_controller()
    cfg = any_pb2.Any()
    cfg.Pack(stratum.P4RoleConfig(exclusive_p4_ids=[42], receives_packet_ins=False))
    arb.update(a, arbitration(5))
    arb.update(b, arbitration(1, role="sdn", config=cfg))
    assert last_status(a_in)[0] == rpc_code.OK and last_status(b_in)[0] == rpc_code.OK
    assert b_in[-1].arbitration.role.config == cfg
    policy = arb.check_primary(1, "sdn", p4r.Uint128(low=1))
    assert policy.writable_ids == {42} and not policy.receives_packet_ins
    assert arb.check_primary(1, "", p4r.Uint128(low=5)).writable_ids is None


# -- digests --------------------------------------------------------------------------------


def test_digest_batching_by_size_timeout_and_ack_suppression(schema: Schema) -> None:
    info = schema.digests.by_name("learn_t")
    sent: list[p4r.DigestList] = []
    batcher = DigestBatcher(sent.append)
    cfg = p4r.DigestEntry.Config(max_timeout_ns=1000, max_list_size=2, ack_timeout_ns=10_000)
    digests = {info.id: (info, cfg)}
    batcher.add(info, cfg, (0xAA, 1), now_ns=0)
    assert batcher.flush_due(digests, now_ns=10) == 1000 and not sent  # waiting for size/timeout
    batcher.add(info, cfg, (0xBB, 2), now_ns=20)
    batcher.flush_due(digests, now_ns=30)
    assert len(sent) == 1 and sent[0].list_id == 1 and len(sent[0].data) == 2
    member = sent[0].data[0].struct.members[0]
    assert member.bitstring == b"\xaa"
    batcher.add(info, cfg, (0xAA, 1), now_ns=40)  # same as an unacked message: suppressed
    batcher.add(info, cfg, (0xCC, 3), now_ns=40)
    batcher.flush_due(digests, now_ns=40 + 1000)  # timeout: a list of one
    assert len(sent) == 2 and len(sent[1].data) == 1 and sent[1].list_id == 2
    assert batcher.ack(info.id, 1) and not batcher.ack(info.id, 1)
    batcher.add(info, cfg, (0xAA, 1), now_ns=2000)  # acked: may be reported again
    batcher.flush_due(digests, now_ns=3000)
    assert len(sent) == 3 and sent[2].data[0].struct.members[0].bitstring == b"\xaa"


def test_digests_without_ack_timeout_are_not_suppressed(schema: Schema) -> None:
    info = schema.digests.by_name("learn_t")
    sent: list[p4r.DigestList] = []
    batcher = DigestBatcher(sent.append)
    cfg = p4r.DigestEntry.Config(max_timeout_ns=0, max_list_size=1, ack_timeout_ns=0)
    for now in (0, 1):
        batcher.add(info, cfg, (0xAA, 1), now_ns=now)
        assert batcher.flush_due({info.id: (info, cfg)}, now_ns=now) is None
    assert [d.list_id for d in sent] == [1, 2]
