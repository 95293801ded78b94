"""P4Runtime rules beyond the basic entity round trips: roles over the wire, device ids,
stream protocol errors, const entries of the program, indirect tables' default entries."""

from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf import any_pb2

from finsy.proto import stratum
from p4sim.proto import p4r, rpc_code
from p4sim.runtime.codec import int_to_bytes

from runtime_fixtures.harness import DEVICE_ID, Runtime, batch_errors, load_device_config, packet
from runtime_fixtures.harness import rt  # noqa: F401 - fixture

INSERT, MODIFY = p4r.Update.INSERT, p4r.Update.MODIFY


def nhop_entry(rt: Runtime, table: str, prefix: bytes, plen: int, port: int) -> p4r.TableEntry:
    entry = p4r.TableEntry(table_id=rt.table_id(table),
                           match=[p4r.FieldMatch(field_id=1, lpm=p4r.FieldMatch.LPM(value=prefix, prefix_len=plen))])
    entry.action.action.action_id = rt.action_id("MyIngress.set_nhop")
    entry.action.action.params.add(param_id=1, value=b"\x0b")
    entry.action.action.params.add(param_id=2, value=int_to_bytes(port))
    return entry


def test_role_config_limits_writes_and_packet_ins(rt: Runtime) -> None:
    admin = rt.become_primary()
    rt.set_pipeline()
    limited = rt.stream()
    config = any_pb2.Any()
    config.Pack(stratum.P4RoleConfig(exclusive_p4_ids=[rt.table_id("MyIngress.acl")], receives_packet_ins=False))
    msg = p4r.MasterArbitrationUpdate(device_id=DEVICE_ID, election_id=p4r.Uint128(low=1))
    msg.role.name = "acl-app"
    msg.role.config.CopyFrom(config)
    limited.send(p4r.StreamMessageRequest(arbitration=msg))
    assert limited.recv().arbitration.status.code == rpc_code.OK  # primary of its own role

    def write(entry: p4r.TableEntry) -> None:
        rt.stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, role="acl-app", election_id=p4r.Uint128(low=1),
                                       updates=[p4r.Update(type=INSERT, entity=p4r.Entity(table_entry=entry))]))

    acl = p4r.TableEntry(table_id=rt.table_id("MyIngress.acl"), priority=1,
                         match=[p4r.FieldMatch(field_id=1, ternary=p4r.FieldMatch.Ternary(value=b"\x0a\x00\x00\x01", mask=b"\xff\xff\xff\xff"))])
    acl.action.action.action_id = rt.action_id("MyIngress.send_to_cpu")
    write(acl)
    with pytest.raises(grpc.RpcError) as exc:
        write(nhop_entry(rt, "MyIngress.ipv4_lpm", b"\x0a\x00\x01\x00", 24, 2))
    assert batch_errors(exc.value)[0].canonical_code == rpc_code.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as exc:
        rt.stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID, role="acl-app", election_id=p4r.Uint128(low=1),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY))
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    rt.dataplane.receive(2, packet())  # hits the ACL entry: to the CPU
    pin = admin.recv()
    assert pin.WhichOneof("update") == "packet"  # the full-access primary gets it ...
    # ... the role without receives_packet_ins does not: the next thing on its stream is
    # the answer to a later request (a PacketOut with an unknown metadata id).
    limited.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(
        payload=b"x", metadata=[p4r.PacketMetadata(metadata_id=9, value=b"\x01")])))
    assert limited.recv().WhichOneof("update") == "error"


def test_device_id_and_stream_protocol_errors(rt: Runtime) -> None:
    rt.become_primary()
    rt.set_pipeline()
    with pytest.raises(grpc.RpcError) as exc:
        rt.stub.Read(p4r.ReadRequest(device_id=99, entities=[p4r.Entity(table_entry={})])).next()
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND and "device id 99" in exc.value.details()
    s = rt.stream()
    s.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=b"x")))
    error = s.recv().error
    assert error.canonical_code == rpc_code.FAILED_PRECONDITION and "MasterArbitrationUpdate" in error.message
    s.send(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(device_id=99)))
    assert s.recv_error().code() == grpc.StatusCode.NOT_FOUND


def test_program_const_entries_are_readable_and_protected(rt: Runtime) -> None:
    bmv2 = json.loads(load_device_config())
    lpm = next(t for t in bmv2["pipelines"][0]["tables"] if t["name"] == "MyIngress.ipv4_lpm")
    lpm["entries"] = [{"match_key": [{"match_type": "lpm", "key": "0x0a000100", "prefix_length": 24}],
                       "action_entry": {"action_id": 2, "action_data": ["0xbb", "0x6"]}, "priority": 1}]
    p4info = rt.p4info.__class__()
    p4info.CopyFrom(rt.p4info)
    p4info.tables[0].is_const_table = True
    rt.become_primary()
    rt.set_pipeline(p4info=p4info, device_config=json.dumps(bmv2).encode())
    (read,) = rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=rt.table_id("MyIngress.ipv4_lpm"))))
    assert read.table_entry.is_const
    assert read.table_entry.match[0].lpm.value == b"\x0a\x00\x01\x00" and read.table_entry.match[0].lpm.prefix_len == 24
    assert [p.value for p in read.table_entry.action.action.params] == [b"\xbb", b"\x06"]
    assert [p for p, _ in rt.dataplane.receive(1, packet())] == [6]
    with pytest.raises(grpc.RpcError) as exc:
        rt.write(p4r.Update(type=INSERT, entity=p4r.Entity(table_entry=nhop_entry(rt, "MyIngress.ipv4_lpm", b"\x0a\x00\x02\x00", 24, 3))))
    assert batch_errors(exc.value)[0].canonical_code == rpc_code.PERMISSION_DENIED
    rt.set_pipeline(p4r.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT, p4info=p4info,
                    device_config=json.dumps(bmv2).encode())  # const entries are not replayed
    assert len(rt.read(p4r.Entity(table_entry=p4r.TableEntry()))) == 1


def test_indirect_default_entry_is_refused_and_member_modify_reaches_entries(rt: Runtime) -> None:
    """The spec pins an indirect table's default entry to a constant NoAction: writing it
    is INVALID_ARGUMENT and changes nothing; modifying a member changes the entries using it."""
    rt.become_primary()
    rt.set_pipeline()
    profile = rt.object_id("action_profiles", "MyIngress.ecmp_sel")
    ecmp = rt.table_id("MyIngress.ecmp")
    member = p4r.ActionProfileMember(action_profile_id=profile, member_id=1)
    member.action.action_id = rt.action_id("MyIngress.set_nhop")
    member.action.params.add(param_id=1, value=b"\x01")
    member.action.params.add(param_id=2, value=b"\x04")
    set_group = p4r.TableEntry(table_id=rt.table_id("MyIngress.ipv4_lpm"),
                               match=[p4r.FieldMatch(field_id=1, lpm=p4r.FieldMatch.LPM(value=b"\x0a\x00\x00\x00", prefix_len=8))])
    set_group.action.action.action_id = rt.action_id("MyIngress.set_group")
    set_group.action.action.params.add(param_id=1, value=b"\x09")
    default = p4r.TableEntry(table_id=ecmp, is_default_action=True)
    default.action.action_profile_member_id = 1
    with pytest.raises(grpc.RpcError) as exc:
        rt.write(p4r.Update(type=INSERT, entity=p4r.Entity(action_profile_member=member)),
                 p4r.Update(type=INSERT, entity=p4r.Entity(table_entry=set_group)),
                 p4r.Update(type=MODIFY, entity=p4r.Entity(table_entry=default)))
    errors = batch_errors(exc.value)
    assert [e.canonical_code for e in errors] == [rpc_code.OK, rpc_code.OK, rpc_code.INVALID_ARGUMENT]
    assert "'MyIngress.ecmp' is indirect: its default entry cannot be written" in errors[2].message
    (read,) = rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=ecmp, is_default_action=True)))
    assert not read.table_entry.HasField("action")  # still the program's NoAction
    assert [p for p, _ in rt.dataplane.receive(1, packet())] == [0]  # no ecmp entry for group 9: NoAction, port 0
    group_entry = p4r.TableEntry(table_id=ecmp, match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=b"\x09"))])
    group_entry.action.action_profile_member_id = 1
    rt.write(p4r.Update(type=INSERT, entity=p4r.Entity(table_entry=group_entry)))
    assert [p for p, _ in rt.dataplane.receive(1, packet())] == [4]
    member.action.params[1].value = b"\x05"
    rt.write(p4r.Update(type=MODIFY, entity=p4r.Entity(action_profile_member=member)))
    assert [p for p, _ in rt.dataplane.receive(1, packet())] == [5]
    with pytest.raises(grpc.RpcError) as exc:  # still used by the entry
        rt.write(p4r.Update(type=p4r.Update.DELETE, entity=p4r.Entity(action_profile_member=member)))
    assert batch_errors(exc.value)[0].canonical_code == rpc_code.FAILED_PRECONDITION


def test_reconcile_that_does_not_fit_keeps_the_old_pipeline(rt: Runtime) -> None:
    rt.become_primary()
    rt.set_pipeline()
    acl = p4r.TableEntry(table_id=rt.table_id("MyIngress.acl"), priority=3,
                         match=[p4r.FieldMatch(field_id=2, optional=p4r.FieldMatch.Optional(value=b"\x06"))])  # TCP only
    acl.action.action.action_id = rt.action_id("MyIngress.drop")
    rt.write(p4r.Update(type=INSERT, entity=p4r.Entity(table_entry=nhop_entry(rt, "MyIngress.ipv4_lpm", b"\x0a\x00\x01\x00", 24, 2))),
             p4r.Update(type=INSERT, entity=p4r.Entity(table_entry=acl)))
    without_acl = rt.p4info.__class__()
    without_acl.CopyFrom(rt.p4info)
    del without_acl.tables[[t.preamble.name for t in without_acl.tables].index("MyIngress.acl")]
    with pytest.raises(grpc.RpcError) as exc:
        rt.set_pipeline(p4r.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT, p4info=without_acl, cookie=99)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "unknown table id" in exc.value.details()
    config = rt.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(device_id=DEVICE_ID)).config
    assert config.cookie.cookie == 7 and config.p4info == rt.p4info  # the old pipeline stays
    assert len(rt.read(p4r.Entity(table_entry=p4r.TableEntry()))) == 2
    assert [p for p, _ in rt.dataplane.receive(1, packet())] == [2]


def test_the_dataplane_hears_packet_ins_while_a_primary_takes_them(rt: Runtime) -> None:
    """``packet_ins_heard`` follows the primaries: False with no controller and with only
    a role that refuses PacketIns (the native loop then keeps them from Python), True
    while a primary takes them, False again when its stream ends."""
    from testkit import wait_for

    assert rt.dataplane.packet_ins_heard is False
    limited = rt.stream()
    config = any_pb2.Any()
    config.Pack(stratum.P4RoleConfig(receives_packet_ins=False))
    msg = p4r.MasterArbitrationUpdate(device_id=DEVICE_ID, election_id=p4r.Uint128(low=1))
    msg.role.name = "no-packets"
    msg.role.config.CopyFrom(config)
    limited.send(p4r.StreamMessageRequest(arbitration=msg))
    assert limited.recv().arbitration.status.code == rpc_code.OK
    admin = rt.become_primary()
    wait_for("PacketIns heard", lambda: rt.dataplane.packet_ins_heard, 5.0)
    admin.close()
    wait_for("PacketIns unheard", lambda: not rt.dataplane.packet_ins_heard, 5.0)
    assert limited.poll() is None   # the limited role's stream is still open
