"""The P4Runtime server over real gRPC: pipeline config, Write/Read of every entity kind,
errors and atomicity, arbitration, packet I/O and digests -- checked against the packets
the engine then forwards."""

from __future__ import annotations

import ipaddress
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4sim.proto import p4r, rpc_code
from p4sim.runtime.codec import int_to_bytes
from p4sim.switch.device import Device
from p4sim.switch.pfc import PfcConfig

from testkit import wait_for

from runtime_fixtures.harness import ARTEFACTS, CPU_PORT, DEVICE_ID, Runtime, batch_errors

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
Action = p4r.SetForwardingPipelineConfigRequest
ResponseType = p4r.GetForwardingPipelineConfigRequest


@pytest.fixture(params=ARTEFACTS)
def rt(request):
    runtime = Runtime(artefacts=request.param)
    yield runtime
    runtime.close()


@pytest.fixture
def ready(rt: Runtime) -> Runtime:
    """A server with a primary controller and the fixture pipeline committed."""
    rt.primary = rt.become_primary()
    rt.set_pipeline()
    return rt


def ip(addr: str) -> bytes:
    return ipaddress.IPv4Address(addr).packed


def packet(dst: str = "10.0.1.5", src: str = "10.0.0.1", ttl: int = 64, proto_payload: bytes = b"hello") -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:aa", src="00:00:00:00:00:01") / IP(src=src, dst=dst, ttl=ttl) / UDP(sport=1234, dport=80) / proto_payload)


def upd(kind: int, **entity) -> p4r.Update:
    return p4r.Update(type=kind, entity=p4r.Entity(**entity))


def action(rt: Runtime, name: str, *values: int) -> p4r.Action:
    return p4r.Action(
        action_id=rt.action_id(name),
        params=[p4r.Action.Param(param_id=i, value=int_to_bytes(v)) for i, v in enumerate(values, 1)],
    )


def lpm_entry(rt: Runtime, prefix: str, plen: int, act: p4r.Action | None = None, **extra) -> p4r.TableEntry:
    entry = p4r.TableEntry(
        table_id=rt.table_id("MyIngress.ipv4_lpm"),
        match=[p4r.FieldMatch(field_id=1, lpm=p4r.FieldMatch.LPM(value=ip(prefix), prefix_len=plen))],
        **extra,
    )
    if act is not None:
        entry.action.action.CopyFrom(act)
    return entry


def nhop(rt: Runtime, dmac: int, port: int) -> p4r.Action:
    return action(rt, "MyIngress.set_nhop", dmac, port)


def acl_entry(rt: Runtime, src: str, mask: str, priority: int, act: p4r.Action) -> p4r.TableEntry:
    entry = p4r.TableEntry(
        table_id=rt.table_id("MyIngress.acl"),
        match=[p4r.FieldMatch(field_id=1, ternary=p4r.FieldMatch.Ternary(value=ip(src), mask=ip(mask)))],
        priority=priority,
    )
    entry.action.action.CopyFrom(act)
    return entry


def ports_of(outputs: list[tuple[int, bytes]]) -> list[int]:
    return sorted(port for port, _ in outputs)


# -- pipeline config ----------------------------------------------------------------------------


def test_no_pipeline_and_capabilities(rt: Runtime) -> None:
    with pytest.raises(grpc.RpcError) as exc:
        rt.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(device_id=DEVICE_ID))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "No forwarding pipeline config set" in exc.value.details()
    assert rt.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version == "1.5.0"
    with pytest.raises(grpc.RpcError) as exc:  # not primary: no arbitration happened
        rt.set_pipeline()
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_get_pipeline_config_response_types(rt: Runtime) -> None:
    rt.become_primary()
    rt.set_pipeline(cookie=0xC0FFEE)

    def get(kind: int) -> p4r.ForwardingPipelineConfig:
        return rt.stub.GetForwardingPipelineConfig(
            p4r.GetForwardingPipelineConfigRequest(device_id=DEVICE_ID, response_type=kind)
        ).config

    full = get(ResponseType.ALL)
    assert full.p4info == rt.p4info and full.p4_device_config.startswith(b"{") and full.cookie.cookie == 0xC0FFEE
    cookie = get(ResponseType.COOKIE_ONLY)
    assert not cookie.HasField("p4info") and not cookie.p4_device_config and cookie.cookie.cookie == 0xC0FFEE
    p4info_only = get(ResponseType.P4INFO_AND_COOKIE)
    assert p4info_only.HasField("p4info") and not p4info_only.p4_device_config
    device = get(ResponseType.DEVICE_CONFIG_AND_COOKIE)
    assert not device.HasField("p4info") and device.p4_device_config == full.p4_device_config


def test_verify_save_commit(rt: Runtime) -> None:
    rt.become_primary()
    bad = rt.p4info.__class__()
    bad.CopyFrom(rt.p4info)
    bad.tables[0].preamble.name = "MyIngress.no_such_table"
    with pytest.raises(grpc.RpcError) as exc:
        rt.set_pipeline(Action.VERIFY, p4info=bad)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "'MyIngress.no_such_table' is in the P4Info but not in the JSON" in exc.value.details()
    with pytest.raises(grpc.RpcError) as exc:
        rt.set_pipeline(Action.VERIFY, device_config=b"not json")
    assert "not BMv2 JSON" in exc.value.details()
    with pytest.raises(grpc.RpcError) as exc:
        rt.set_pipeline(Action.COMMIT)
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND  # the spec's code: no saved config
    rt.set_pipeline(Action.VERIFY)
    rt.set_pipeline(Action.VERIFY_AND_SAVE, cookie=3)
    with pytest.raises(grpc.RpcError) as exc:  # COMMIT takes no config
        rt.stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID, election_id=p4r.Uint128(low=rt.election_id), action=Action.COMMIT,
            config=p4r.ForwardingPipelineConfig(p4info=rt.p4info)))
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "COMMIT takes no config" in exc.value.details()
    with pytest.raises(grpc.RpcError) as exc:  # saved, not yet committed
        rt.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(device_id=DEVICE_ID))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    rt.set_pipeline(Action.COMMIT, cookie=None)
    got = rt.stub.GetForwardingPipelineConfig(
        p4r.GetForwardingPipelineConfigRequest(device_id=DEVICE_ID, response_type=ResponseType.COOKIE_ONLY)
    )
    assert got.config.cookie.cookie == 3


def test_reconcile_keeps_state_and_commit_clears_it(ready: Runtime) -> None:
    rt = ready
    rt.write(upd(INSERT, table_entry=lpm_entry(rt, "10.0.1.0", 24, nhop(rt, 0xB, 2))))
    assert ports_of(rt.dataplane.receive(1, packet())) == [2]
    rt.set_pipeline(Action.RECONCILE_AND_COMMIT)
    assert ports_of(rt.dataplane.receive(1, packet())) == [2]
    assert len(rt.read(p4r.Entity(table_entry=p4r.TableEntry()))) == 1
    rt.set_pipeline(Action.VERIFY_AND_COMMIT)
    assert rt.dataplane.receive(1, packet()) == []
    assert rt.read(p4r.Entity(table_entry=p4r.TableEntry())) == []


# -- table entries ------------------------------------------------------------------------------


def test_insert_routes_packets_and_read_returns_canonical_entry(ready: Runtime) -> None:
    rt = ready
    assert rt.dataplane.receive(1, packet()) == []  # default action: drop
    entry = lpm_entry(rt, "10.0.1.0", 24, nhop(rt, 0x0000000000BB, 2))
    entry.match[0].lpm.value = b"\x00\x00" + ip("10.0.1.0")  # leading zeros are accepted
    rt.write(upd(INSERT, table_entry=entry))
    (out_port, out), = rt.dataplane.receive(1, packet())
    assert out_port == 2
    assert Ether(out).dst == "00:00:00:00:00:bb" and Ether(out)[IP].ttl == 63
    (read,) = rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=rt.table_id("MyIngress.ipv4_lpm"))))
    assert read.table_entry.match[0].lpm.value == ip("10.0.1.0")
    assert [p.value for p in read.table_entry.action.action.params] == [b"\xbb", b"\x02"]
    counted = rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=0, counter_data=p4r.CounterData())))
    assert counted[0].table_entry.counter_data.packet_count == 1
    assert counted[0].table_entry.counter_data.byte_count == len(packet())
    rt.write(upd(MODIFY, table_entry=lpm_entry(rt, "10.0.1.0", 24, nhop(rt, 0xCC, 3))))
    assert ports_of(rt.dataplane.receive(1, packet())) == [3]
    rt.write(upd(DELETE, table_entry=lpm_entry(rt, "10.0.1.0", 24)))
    assert rt.dataplane.receive(1, packet()) == []


def test_failed_batch_reports_each_update_and_changes_nothing_it_rejected(ready: Runtime) -> None:
    rt = ready
    rt.write(upd(INSERT, table_entry=lpm_entry(rt, "10.0.1.0", 24, nhop(rt, 0xB, 2))))
    before = rt.read(p4r.Entity(table_entry=p4r.TableEntry()))
    unknown_table = lpm_entry(rt, "10.0.3.0", 24, nhop(rt, 0xB, 2))
    unknown_table.table_id = 0x02ABCDEF
    too_wide = lpm_entry(rt, "10.0.4.0", 24, nhop(rt, 0xB, 600))
    with pytest.raises(grpc.RpcError) as exc:
        rt.write(
            upd(INSERT, table_entry=lpm_entry(rt, "10.0.2.0", 24, nhop(rt, 0xD, 4))),  # fine
            upd(INSERT, table_entry=lpm_entry(rt, "10.0.1.0", 24, nhop(rt, 0xE, 5))),  # duplicate
            upd(INSERT, table_entry=lpm_entry(rt, "10.0.1.1", 24, nhop(rt, 0xE, 5))),  # host bits
            upd(INSERT, table_entry=unknown_table),
            upd(INSERT, table_entry=too_wide),
            upd(MODIFY, table_entry=lpm_entry(rt, "10.9.0.0", 16, nhop(rt, 0xE, 5))),  # no such entry
            upd(INSERT, table_entry=p4r.TableEntry(table_id=rt.table_id("MyIngress.ecmp"), action={"action_profile_member_id": 1})),
        )
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    errors = batch_errors(exc.value)
    assert [e.canonical_code for e in errors] == [
        rpc_code.OK, rpc_code.ALREADY_EXISTS, rpc_code.INVALID_ARGUMENT, rpc_code.INVALID_ARGUMENT,
        rpc_code.OUT_OF_RANGE, rpc_code.NOT_FOUND, rpc_code.INVALID_ARGUMENT,
    ]
    assert "already exists" in errors[1].message
    assert "bits set past prefix length 24" in errors[2].message
    assert "unknown table id" in errors[3].message
    assert "parameter 'port'" in errors[4].message and "too wide for bitwidth 9" in errors[4].message
    assert "no entry with this match key" in errors[5].message
    assert "missing mandatory match field" in errors[6].message
    after = rt.read(p4r.Entity(table_entry=p4r.TableEntry()))
    assert len(after) == len(before) + 1  # only the good insert landed
    assert ports_of(rt.dataplane.receive(1, packet())) == [2]  # the duplicate did not overwrite
    assert ports_of(rt.dataplane.receive(1, packet(dst="10.0.2.9"))) == [4]


def test_unsupported_atomicity_is_rejected_by_name(ready: Runtime) -> None:
    with pytest.raises(grpc.RpcError) as exc:
        ready.write(upd(INSERT, table_entry=lpm_entry(ready, "10.0.1.0", 24, nhop(ready, 1, 2))),
                    atomicity=p4r.WriteRequest.ROLLBACK_ON_ERROR)
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED and "ROLLBACK_ON_ERROR" in exc.value.details()
    assert ready.read(p4r.Entity(table_entry=p4r.TableEntry())) == []


def test_default_entry_modify_read_and_reset(ready: Runtime) -> None:
    rt = ready
    table_id = rt.table_id("MyIngress.ipv4_lpm")
    (default,) = rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=table_id, is_default_action=True)))
    assert default.table_entry.action.action.action_id == rt.action_id("MyIngress.drop")
    entry = p4r.TableEntry(table_id=table_id, is_default_action=True)
    entry.action.action.CopyFrom(nhop(rt, 0xAB, 7))
    rt.write(upd(MODIFY, table_entry=entry))
    assert ports_of(rt.dataplane.receive(1, packet(dst="192.168.0.1"))) == [7]
    (default,) = rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=table_id, is_default_action=True)))
    assert default.table_entry.action.action == nhop(rt, 0xAB, 7)
    with pytest.raises(grpc.RpcError) as exc:
        rt.write(upd(INSERT, table_entry=entry))
    assert batch_errors(exc.value)[0].canonical_code == rpc_code.INVALID_ARGUMENT
    rt.write(upd(MODIFY, table_entry=p4r.TableEntry(table_id=table_id, is_default_action=True)))
    assert rt.dataplane.receive(1, packet(dst="192.168.0.1")) == []
    assert rt.read(p4r.Entity(table_entry=p4r.TableEntry())) == []  # defaults are not listed


def test_ternary_priorities_and_packet_in(ready: Runtime) -> None:
    rt = ready
    rt.write(
        upd(INSERT, table_entry=lpm_entry(rt, "10.0.1.0", 24, nhop(rt, 0xB, 2))),
        upd(INSERT, table_entry=acl_entry(rt, "10.0.0.0", "255.255.0.0", 10, action(rt, "MyIngress.drop"))),
        upd(INSERT, table_entry=acl_entry(rt, "10.0.0.1", "255.255.255.255", 20, action(rt, "MyIngress.send_to_cpu"))),
    )
    assert rt.dataplane.receive(3, packet(src="10.0.7.7")) == []  # priority 10 entry: drop
    assert ports_of(rt.dataplane.receive(3, packet(src="10.0.0.1"))) == [CPU_PORT]  # priority 20 wins
    msg = rt.primary.recv()
    assert msg.WhichOneof("update") == "packet"
    assert [(m.metadata_id, m.value) for m in msg.packet.metadata] == [(1, b"\x03"), (2, b"\x00")]
    assert Ether(msg.packet.payload)[IP].src == "10.0.0.1"
    with pytest.raises(grpc.RpcError) as exc:  # ternary table: priority is mandatory
        rt.write(upd(INSERT, table_entry=acl_entry(rt, "10.1.0.0", "255.255.0.0", 0, action(rt, "MyIngress.drop"))))
    assert "need a priority" in batch_errors(exc.value)[0].message
    read = rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=rt.table_id("MyIngress.acl"))))
    assert sorted(e.table_entry.priority for e in read) == [10, 20]
    masks = {e.table_entry.priority: e.table_entry.match[0].ternary.mask for e in read}
    assert masks == {10: ip("255.255.0.0"), 20: ip("255.255.255.255")}


# -- action profiles ------------------------------------------------------------------------------


def test_action_selector_members_groups_and_one_shot(ready: Runtime) -> None:
    rt = ready
    profile = rt.object_id("action_profiles", "MyIngress.ecmp_sel")
    ecmp = rt.table_id("MyIngress.ecmp")
    members = [
        upd(INSERT, action_profile_member=p4r.ActionProfileMember(action_profile_id=profile, member_id=m, action=nhop(rt, m, m)))
        for m in (11, 12)
    ]
    group = p4r.ActionProfileGroup(action_profile_id=profile, group_id=1,
                                   members=[p4r.ActionProfileGroup.Member(member_id=m, weight=1) for m in (11, 12)])
    group_entry = p4r.TableEntry(table_id=ecmp, match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=b"\x05"))])
    group_entry.action.action_profile_group_id = 1
    rt.write(
        *members,
        upd(INSERT, action_profile_group=group),
        upd(INSERT, table_entry=lpm_entry(rt, "10.0.0.0", 8, action(rt, "MyIngress.set_group", 5))),
        upd(INSERT, table_entry=group_entry),
    )
    seen = set()
    for host in range(1, 40):
        seen.update(ports_of(rt.dataplane.receive(1, packet(dst=f"10.0.2.{host}", src=f"10.9.{host}.1"))))
    assert seen == {11, 12}  # flows spread over both members
    assert {m.action_profile_member.member_id for m in rt.read(p4r.Entity(action_profile_member=p4r.ActionProfileMember()))} == {11, 12}
    (g,) = rt.read(p4r.Entity(action_profile_group=p4r.ActionProfileGroup(action_profile_id=profile)))
    assert sorted(m.member_id for m in g.action_profile_group.members) == [11, 12]
    with pytest.raises(grpc.RpcError) as exc:  # in use by the group
        rt.write(upd(DELETE, action_profile_member=p4r.ActionProfileMember(action_profile_id=profile, member_id=11)))
    assert batch_errors(exc.value)[0].canonical_code == rpc_code.FAILED_PRECONDITION
    group.ClearField("members")
    group.members.add(member_id=12, weight=1)
    rt.write(upd(MODIFY, action_profile_group=group))
    assert {p for h in range(1, 20) for p in ports_of(rt.dataplane.receive(1, packet(dst=f"10.0.2.{h}")))} == {12}
    # one-shot: the entry carries its own action set; no member or group becomes visible
    oneshot = p4r.TableEntry(table_id=ecmp, match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=b"\x05"))])
    for port in (21, 22):
        oneshot.action.action_profile_action_set.action_profile_actions.add(action=nhop(rt, port, port), weight=1)
    rt.write(upd(MODIFY, table_entry=oneshot))
    seen = {p for h in range(1, 40) for p in ports_of(rt.dataplane.receive(1, packet(dst=f"10.0.2.{h}", src=f"10.8.{h}.1")))}
    assert seen == {21, 22}
    (read,) = rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=ecmp)))
    assert len(read.table_entry.action.action_profile_action_set.action_profile_actions) == 2
    assert len(rt.read(p4r.Entity(action_profile_group=p4r.ActionProfileGroup()))) == 1


# -- externs --------------------------------------------------------------------------------------


def test_counters_registers_and_meters(ready: Runtime) -> None:
    rt = ready
    counter = rt.object_id("counters", "MyIngress.port_pkts")
    register = rt.object_id("registers", "MyIngress.last_src")
    meter = rt.object_id("meters", "MyIngress.port_meter")
    for _ in range(3):
        rt.dataplane.receive(6, packet(src="10.0.0.42"))
    cells = rt.read(p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=counter)))
    assert len(cells) == 64
    assert cells[6].counter_entry.data.packet_count == 3 and cells[5].counter_entry.data.packet_count == 0
    rt.write(upd(MODIFY, counter_entry=p4r.CounterEntry(counter_id=counter, index=p4r.Index(index=6), data=p4r.CounterData())))
    (cell,) = rt.read(p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=counter, index=p4r.Index(index=6))))
    assert cell.counter_entry.data.packet_count == 0
    (reg,) = rt.read(p4r.Entity(register_entry=p4r.RegisterEntry(register_id=register, index=p4r.Index(index=6))))
    assert reg.register_entry.data.bitstring == ip("10.0.0.42")
    rt.write(upd(MODIFY, register_entry=p4r.RegisterEntry(register_id=register, index=p4r.Index(index=2),
                                                           data={"bitstring": b"\x00\x00\x12\x34"})))
    all_regs = rt.read(p4r.Entity(register_entry=p4r.RegisterEntry()))
    assert len(all_regs) == 64 and all_regs[2].register_entry.data.bitstring == b"\x12\x34"
    with pytest.raises(grpc.RpcError) as exc:
        rt.write(upd(MODIFY, register_entry=p4r.RegisterEntry(register_id=register, index=p4r.Index(index=64),
                                                               data={"bitstring": b"\x01"})))
    assert batch_errors(exc.value)[0].canonical_code == rpc_code.OUT_OF_RANGE
    assert "index 64 out of range" in batch_errors(exc.value)[0].message
    config = p4r.MeterConfig(cir=1000, cburst=10, pir=2000, pburst=20)
    rt.write(upd(MODIFY, meter_entry=p4r.MeterEntry(meter_id=meter, index=p4r.Index(index=1), config=config)))
    (m,) = rt.read(p4r.Entity(meter_entry=p4r.MeterEntry(meter_id=meter, index=p4r.Index(index=1))))
    assert m.meter_entry.config == config
    with pytest.raises(grpc.RpcError) as exc:
        rt.write(upd(INSERT, counter_entry=p4r.CounterEntry(counter_id=counter, index=p4r.Index(index=1))))
    assert "only MODIFY" in batch_errors(exc.value)[0].message


def test_direct_counter_entries(ready: Runtime) -> None:
    rt = ready
    entry = lpm_entry(rt, "10.0.1.0", 24, nhop(rt, 0xB, 2))
    rt.write(upd(INSERT, table_entry=entry))
    rt.dataplane.receive(1, packet())
    rt.dataplane.receive(1, packet())
    (dc,) = rt.read(p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=p4r.TableEntry(table_id=rt.table_id("MyIngress.ipv4_lpm")))))
    assert dc.direct_counter_entry.data.packet_count == 2
    rt.write(upd(MODIFY, direct_counter_entry=p4r.DirectCounterEntry(table_entry=lpm_entry(rt, "10.0.1.0", 24),
                                                                     data=p4r.CounterData(packet_count=100, byte_count=5))))
    (dc,) = rt.read(p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=p4r.TableEntry())))
    assert dc.direct_counter_entry.data.packet_count == 100


def test_multicast_and_clone_sessions(ready: Runtime) -> None:
    rt = ready
    group = p4r.MulticastGroupEntry(multicast_group_id=9, replicas=[p4r.Replica(port=b"\x02", instance=1),
                                                                     p4r.Replica(port=b"\x00\x03", instance=1)])
    rt.write(
        upd(INSERT, packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(multicast_group_entry=group)),
        upd(INSERT, table_entry=lpm_entry(rt, "10.0.9.0", 24, action(rt, "MyIngress.set_mcast", 9))),
    )
    assert ports_of(rt.dataplane.receive(1, packet(dst="10.0.9.1"))) == [2, 3]
    (read,) = rt.read(p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(multicast_group_entry={})))
    assert [r.port for r in read.packet_replication_engine_entry.multicast_group_entry.replicas] == [b"\x02", b"\x03"]
    session = p4r.CloneSessionEntry(session_id=5, replicas=[p4r.Replica(egress_port=8)])
    rt.write(
        upd(INSERT, packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(clone_session_entry=session)),
        upd(INSERT, table_entry=acl_entry(rt, "10.0.0.1", "255.255.255.255", 1, action(rt, "MyIngress.mirror", 5))),
    )
    assert ports_of(rt.dataplane.receive(1, packet(dst="10.0.9.1"))) == [2, 3, 8]
    with pytest.raises(grpc.RpcError) as exc:
        rt.write(upd(INSERT, packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(clone_session_entry=session)))
    assert batch_errors(exc.value)[0].canonical_code == rpc_code.ALREADY_EXISTS
    rt.write(upd(DELETE, packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(multicast_group_entry=group)))
    assert ports_of(rt.dataplane.receive(1, packet(dst="10.0.9.1"))) == [8]


def test_parser_value_set(ready: Runtime) -> None:
    rt = ready
    vs_id = rt.object_id("value_sets", "MyParser.ipv4_types")
    rt.write(upd(INSERT, table_entry=lpm_entry(rt, "10.0.1.0", 24, nhop(rt, 0xB, 2))))
    frame = bytearray(packet())
    frame[12:14] = b"\x88\x88"  # an EtherType the parser only takes as IPv4 if in the set
    assert ports_of(rt.dataplane.receive(1, bytes(frame))) == [0]  # not parsed: no route, port 0
    member = p4r.ValueSetMember(match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=b"\x88\x88"))])
    rt.write(upd(MODIFY, value_set_entry=p4r.ValueSetEntry(value_set_id=vs_id, members=[member])))
    assert ports_of(rt.dataplane.receive(1, bytes(frame))) == [2]  # parsed as IPv4 and routed
    (read,) = rt.read(p4r.Entity(value_set_entry=p4r.ValueSetEntry(value_set_id=vs_id)))
    assert list(read.value_set_entry.members) == [member]
    with pytest.raises(grpc.RpcError) as exc:
        rt.write(upd(MODIFY, value_set_entry=p4r.ValueSetEntry(value_set_id=vs_id, members=[
            p4r.ValueSetMember(match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=bytes([0x90, i])))])
            for i in range(5)])))
    assert batch_errors(exc.value)[0].canonical_code == rpc_code.RESOURCE_EXHAUSTED
    assert ports_of(rt.dataplane.receive(1, bytes(frame))) == [2]  # unchanged
    rt.write(upd(MODIFY, value_set_entry=p4r.ValueSetEntry(value_set_id=vs_id)))
    assert ports_of(rt.dataplane.receive(1, bytes(frame))) == [0]


# -- stream: arbitration, packet out, digests -----------------------------------------------------


def test_backup_cannot_write_and_is_told_when_the_primary_leaves(ready: Runtime) -> None:
    rt = ready
    backup = rt.stream()
    update = backup.arbitrate(5)
    assert update.status.code == rpc_code.ALREADY_EXISTS and update.election_id.low == 10
    with pytest.raises(grpc.RpcError) as exc:
        rt.write(upd(INSERT, table_entry=lpm_entry(rt, "10.0.1.0", 24, nhop(rt, 1, 2))), election_id=5)
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert rt.read(p4r.Entity(table_entry=p4r.TableEntry())) == []  # reads are open to all
    duplicate = rt.stream()
    duplicate.send(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(device_id=DEVICE_ID, election_id=p4r.Uint128(low=5))))
    err = duplicate.recv_error()
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "already used" in err.details()
    rt.primary.close()
    update = backup.recv().arbitration
    assert update.status.code == rpc_code.NOT_FOUND and update.election_id.low == 10
    assert backup.arbitrate(10).status.code == rpc_code.OK  # takes over with the highest id


class WatchedLock:
    """The dataplane's lock, telling ``waiting`` when a Write's update is blocked taking
    it (so a test knows a Write is in flight inside the server, past its primary check;
    other threads, e.g. the digest pump, take this lock too)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.waiting = threading.Event()

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_name != "apply_updates":
                frame = frame.f_back
            if frame is not None:
                self.waiting.set()
            self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_stop_ends_streams_at_once_and_lets_a_write_in_flight_finish(ready: Runtime) -> None:
    """A stopping switch ends its controllers' streams at once, UNAVAILABLE (it used to
    hold them for the whole grace, then cancel them: a second per switch stop with GOR
    connected), while a Write already in flight still gets the grace to finish."""
    rt = ready
    grace = 60.0   # far beyond the waits below: only the old stop would use it up
    lock = rt.dataplane.lock = WatchedLock()
    with ThreadPoolExecutor(2) as pool:
        with lock:   # the Write blocks inside the server, on the engine's lock
            write = pool.submit(rt.write, upd(INSERT, table_entry=lpm_entry(rt, "10.0.1.0", 24, nhop(rt, 1, 2))))
            assert lock.waiting.wait(10), "the Write never reached the engine"
            stop = pool.submit(rt.server.stop, grace)
            err = rt.primary.recv_error(timeout=10)
            assert err.code() == grpc.StatusCode.UNAVAILABLE and err.details() == "the switch is stopping"
            assert not write.done() and not stop.done()   # the Write has its grace
        write.result(timeout=10)                             # ... and finishes OK in it
        wait_for("the server stopped", stop.done, 10)
        stop.result()


def test_packet_out_is_injected_at_the_cpu_port(ready: Runtime) -> None:
    rt = ready
    payload = packet(dst="172.16.0.1")
    rt.primary.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(
        payload=payload, metadata=[p4r.PacketMetadata(metadata_id=1, value=b"\x05")])))
    backup = rt.stream()
    backup.arbitrate(3)
    backup.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=payload)))
    error = backup.recv().error
    assert error.canonical_code == rpc_code.PERMISSION_DENIED and error.packet_out.packet_out.payload == payload
    rt.primary.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(
        payload=payload, metadata=[p4r.PacketMetadata(metadata_id=9, value=b"\x05")])))
    error = rt.primary.recv().error
    assert error.canonical_code == rpc_code.INVALID_ARGUMENT and "no metadata id 9" in error.message
    assert rt.dataplane.sent == [(5, payload)]  # the packet_out header was consumed by the pipeline


def test_digest_delivery_and_ack(ready: Runtime) -> None:
    rt = ready
    digest_id = rt.object_id("digests", "learn_t")
    rt.dataplane.receive(4, packet(ttl=1))  # before configuration: not reported
    rt.write(upd(INSERT, digest_entry=p4r.DigestEntry(
        digest_id=digest_id, config=p4r.DigestEntry.Config(max_timeout_ns=0, max_list_size=1, ack_timeout_ns=10**9))))
    rt.dataplane.receive(4, packet(ttl=1))
    msg = rt.primary.recv()
    assert msg.WhichOneof("update") == "digest"
    members = msg.digest.data[0].struct.members
    assert [m.bitstring for m in members] == [b"\x01", b"\x04"]  # srcAddr 00:..:01, ingress_port 4
    rt.primary.send(p4r.StreamMessageRequest(digest_ack=p4r.DigestListAck(digest_id=digest_id, list_id=msg.digest.list_id)))
    (cfg,) = rt.read(p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=digest_id)))
    assert cfg.digest_entry.config.max_list_size == 1


def test_queue_control_over_grpc() -> None:
    from p4sim.runtime.queues import QueueControlClient

    device = Device({}, cpu_port=CPU_PORT)
    runtime = Runtime(queue_control=device)
    try:
        client = QueueControlClient(runtime.channel)
        client.set_port_rate(3, 8.0)  # 8 Mbit/s = 1e6 bytes/s
        client.set_queue_depth(16, port=3)
        stats = client.queue_stats()
        assert stats[3]["rate_bytes_per_s"] == 1e6 and stats[3]["depth"] == 16
        assert device.queue_stats()[3]["depth"] == 16
        with pytest.raises(grpc.RpcError) as exc:
            client.set_queue_depth(-1, port=3)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        runtime.close()
        device.close()


def test_pfc_switched_over_queue_control() -> None:
    from p4sim.runtime.queues import QueueControlClient

    device = Device({}, cpu_port=CPU_PORT, priority_queues=8)
    runtime = Runtime(queue_control=device)
    try:
        client = QueueControlClient(runtime.channel)
        client.set_pfc([3], xoff=30000, xon=10000, headroom=20000, watchdog_ms=500)
        assert device.tm.pfc == PfcConfig(frozenset({3}), 30000, 10000, 20000, 500_000.0)
        client.set_queue_depth(16, port=3)
        assert client.queue_stats()[3]["pfc"]["pause_tx"] == [0] * 8
        for bad, words in (({"priorities": [9], "xoff": 2, "xon": 1, "headroom": 0}, "0..7"),
                           ({"priorities": [3], "xoff": 2, "xon": 5, "headroom": 0}, "xon"),
                           ({"priorities": "3"}, "'priorities'")):
            with pytest.raises(grpc.RpcError) as exc:
                client._call("SetPfc", **bad)
            assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT and words in exc.value.details()
        assert device.tm.pfc is not None          # a rejected call leaves PFC as it was
        client.set_pfc([])
        assert device.tm.pfc is None
    finally:
        runtime.close()
        device.close()
