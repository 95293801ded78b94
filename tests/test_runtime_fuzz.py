"""Property-based fuzzing of the P4Runtime server (issue 15 part 2), with hypothesis.

Two in-process servers run the fixture program, the *target* on the native engine
(the pipeline generated in C, its tables mirrored from the Python control-plane book),
the *oracle* on the Python engine, the reference. The target gets random and hostile
requests (Write batches of mostly plausible, often malformed updates, garbage and
mutated request bytes, reads, pipeline configs with mutated P4Info/JSON, requests from
non-primaries and stale election ids); the *oracle* gets only what the target accepted,
in the same order. Properties:

* no request is answered INTERNAL or UNKNOWN (UNKNOWN only as the spec's failed-batch
  status, whose per-update codes are neither);
* a request rejected as a whole changes nothing (full read-back before == after);
* after the run the target's full read-back equals the oracle's -- the state the
  accepted updates built -- and both forward probe packets alike (native as Python);
* on the stream: hostile messages end in a status or StreamError that is never
  INTERNAL/UNKNOWN, and the primary stays primary and can still write.

The runs are derandomized with a bounded number of examples, so CI is deterministic and
the test takes a few seconds; ``P4SIM_FUZZ_EXAMPLES=2000`` runs a longer campaign.
"""

from __future__ import annotations

import json
import os
import time

import grpc
import pytest
from google.protobuf import any_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from p4sim.proto import p4i, p4r, rpc_code
from p4sim.switch.native.engine import NativeSwitch

from fuzzkit import count, overwrite
from runtime_fixtures.harness import (CPU_PORT, DEVICE_ID, EVERYTHING, ClosedByServer, Runtime, Stream, batch_errors,
                                      load_artefacts, packet)

P4INFO, DEVICE_CONFIG = load_artefacts("hand-written")
INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
Action = p4r.SetForwardingPipelineConfigRequest
PRIMARY_ID = 10
BAD_CODES = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
BAD_RPC_CODES = {rpc_code.INTERNAL, rpc_code.UNKNOWN}
EXAMPLES = int(os.environ.get("P4SIM_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _ids(kind: str) -> list[int]:
    return [o.preamble.id for o in getattr(P4INFO, kind)]


TABLES, ACTIONS, COUNTERS = _ids("tables"), _ids("actions"), _ids("counters")
METERS, REGISTERS, PROFILES = _ids("meters"), _ids("registers"), _ids("action_profiles")
VALUE_SETS, DIGESTS = _ids("value_sets"), _ids("digests")

# -- strategies: plausible values most of the time, hostile ones often --------------------------

u32 = st.integers(0, 2**32 - 1)
small = st.integers(0, 6)
values = st.one_of(st.binary(min_size=0, max_size=6), st.sampled_from([b"\x0a\x00\x01\x00", b"\x0a\x00\x02\x00", b"\x01", b"\x02", b"\x00"]))


def some_id(valid: list[int]) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(valid), u32) if valid else u32


update_types = st.one_of(st.sampled_from([INSERT, MODIFY, DELETE]), st.integers(-2, 10))
field_matches = st.builds(
    lambda fid, kind, a, b, plen: p4r.FieldMatch(field_id=fid, **{
        "exact": {"exact": {"value": a}},
        "lpm": {"lpm": {"value": a, "prefix_len": plen}},
        "ternary": {"ternary": {"value": a, "mask": b}},
        "range": {"range": {"low": a, "high": b}},
        "optional": {"optional": {"value": a}},
        "none": {},
    }[kind]),
    st.one_of(st.integers(1, 3), u32), st.sampled_from(["exact", "lpm", "ternary", "range", "optional", "none"]),
    values, values, st.one_of(st.sampled_from([8, 16, 24, 32]), st.integers(-5, 70)),
)
actions = st.builds(
    lambda aid, params: p4r.Action(action_id=aid, params=[p4r.Action.Param(param_id=i, value=v) for i, v in params]),
    some_id(ACTIONS), st.lists(st.tuples(st.integers(0, 3), values), max_size=3),
)


@st.composite
def table_actions(draw) -> p4r.TableAction:
    kind = draw(st.sampled_from(["action", "action", "member", "group", "set", "none"]))
    if kind == "action":
        return p4r.TableAction(action=draw(actions))
    if kind == "member":
        return p4r.TableAction(action_profile_member_id=draw(small))
    if kind == "group":
        return p4r.TableAction(action_profile_group_id=draw(small))
    if kind == "set":
        out = p4r.TableAction()
        for a, w in draw(st.lists(st.tuples(actions, st.integers(-1, 2)), max_size=3)):
            out.action_profile_action_set.action_profile_actions.add(action=a, weight=w)
        return out
    return p4r.TableAction()


@st.composite
def table_entries(draw) -> p4r.TableEntry:
    entry = p4r.TableEntry(
        table_id=draw(some_id(TABLES)),
        match=draw(st.lists(field_matches, max_size=3)),
        priority=draw(st.one_of(st.just(0), st.integers(1, 4), st.integers(-2**31, 2**31 - 1))),
        is_default_action=draw(st.integers(0, 5)) == 0,
        is_const=draw(st.integers(0, 9)) == 0,
        idle_timeout_ns=draw(st.sampled_from([0, 0, 0, 1, -1])),
        metadata=draw(st.binary(max_size=3)),
    )
    table_action = draw(table_actions())
    if table_action.WhichOneof("type"):
        entry.action.CopyFrom(table_action)
    extra = draw(st.sampled_from(["", "", "counter", "meter", "meter_counter", "hit"]))
    if extra == "counter":
        entry.counter_data.CopyFrom(p4r.CounterData(packet_count=draw(st.integers(-3, 3)), byte_count=draw(st.integers(-3, 3))))
    elif extra == "meter":
        entry.meter_config.CopyFrom(p4r.MeterConfig(cir=draw(st.integers(-1, 5)), pir=draw(st.integers(-1, 5))))
    elif extra == "meter_counter":
        entry.meter_counter_data.green.packet_count = draw(st.integers(0, 1))
    elif extra == "hit":
        entry.time_since_last_hit.SetInParent()
    return entry


indexes = st.one_of(st.none(), st.integers(0, 70), st.integers(-2**63, 2**63 - 1))


def with_index(msg, index: int | None):
    if index is not None:
        msg.index.index = index
    return msg


entities = st.one_of(
    table_entries().map(lambda te: p4r.Entity(table_entry=te)),
    st.builds(lambda cid, i, pk, by: p4r.Entity(counter_entry=with_index(
        p4r.CounterEntry(counter_id=cid, data=p4r.CounterData(packet_count=pk, byte_count=by)), i)),
        some_id(COUNTERS), indexes, st.integers(-2, 2), st.integers(-2, 2)),
    st.builds(lambda rid, i, v: p4r.Entity(register_entry=with_index(
        p4r.RegisterEntry(register_id=rid, data={"bitstring": v}), i)), some_id(REGISTERS), indexes, values),
    st.builds(lambda mid, i, cir, pir: p4r.Entity(meter_entry=with_index(
        p4r.MeterEntry(meter_id=mid, config=p4r.MeterConfig(cir=cir, cburst=1, pir=pir, pburst=1)), i)),
        some_id(METERS), indexes, st.integers(-1, 10**6), st.integers(-1, 10**6)),
    st.builds(lambda te, pk: p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(
        table_entry=te, data=p4r.CounterData(packet_count=pk))), table_entries(), st.integers(-2, 2)),
    st.builds(lambda pid, mid, a: p4r.Entity(action_profile_member=p4r.ActionProfileMember(
        action_profile_id=pid, member_id=mid, action=a)), some_id(PROFILES), small, actions),
    st.builds(lambda pid, gid, members, size: p4r.Entity(action_profile_group=p4r.ActionProfileGroup(
        action_profile_id=pid, group_id=gid, max_size=size,
        members=[p4r.ActionProfileGroup.Member(member_id=m, weight=w) for m, w in members])),
        some_id(PROFILES), small, st.lists(st.tuples(small, st.integers(-1, 2)), max_size=3), st.integers(-1, 70)),
    st.builds(lambda gid, reps: p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        multicast_group_entry=p4r.MulticastGroupEntry(multicast_group_id=gid,
                                                      replicas=[p4r.Replica(port=p, instance=i) for p, i in reps]))),
        st.one_of(small, u32), st.lists(st.tuples(values, st.integers(0, 2**17)), max_size=3)),
    st.builds(lambda sid, reps: p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        clone_session_entry=p4r.CloneSessionEntry(session_id=sid,
                                                  replicas=[p4r.Replica(egress_port=p, instance=i) for p, i in reps]))),
        st.one_of(small, u32), st.lists(st.tuples(st.integers(0, 600), st.integers(0, 2)), max_size=3)),
    st.builds(lambda vid, members: p4r.Entity(value_set_entry=p4r.ValueSetEntry(
        value_set_id=vid, members=[p4r.ValueSetMember(match=m) for m in members])),
        some_id(VALUE_SETS), st.lists(st.lists(field_matches, max_size=2), max_size=6)),
    st.builds(lambda did, t, n, ack: p4r.Entity(digest_entry=p4r.DigestEntry(
        digest_id=did, config=p4r.DigestEntry.Config(max_timeout_ns=t, max_list_size=n, ack_timeout_ns=ack))),
        some_id(DIGESTS), st.integers(-1, 10**9), st.integers(-1, 10), st.integers(-1, 10**9)),
    st.just(p4r.Entity()),
)

# Well-formed entities over a few small value pools, so that inserts collide, modifies and
# deletes find their entries, and groups, members and entries refer to each other.
PARAM_WIDTHS = {a.preamble.id: [(p.id, p.bitwidth) for p in a.params] for a in P4INFO.actions}
ENTRY_ACTIONS = {t.preamble.id: [r.id for r in t.action_refs if r.scope != p4i.ActionRef.DEFAULT_ONLY] for t in P4INFO.tables}
DEFAULT_ACTIONS = {t.preamble.id: [r.id for r in t.action_refs if r.scope != p4i.ActionRef.TABLE_ONLY] for t in P4INFO.tables}
LPM, ACL, ECMP = (next(t.preamble.id for t in P4INFO.tables if t.preamble.name == n)
                  for n in ("MyIngress.ipv4_lpm", "MyIngress.acl", "MyIngress.ecmp"))
SET_NHOP = next(a.preamble.id for a in P4INFO.actions if a.preamble.name == "MyIngress.set_nhop")
ids_1_3 = st.integers(1, 3)


@st.composite
def good_actions(draw, choices: list[int]) -> p4r.Action:
    action_id = draw(st.sampled_from(choices))
    params = [p4r.Action.Param(param_id=pid, value=bytes([draw(st.integers(0, min(255, 2**width - 1)))]))
              for pid, width in PARAM_WIDTHS[action_id]]
    return p4r.Action(action_id=action_id, params=params)


@st.composite
def good_table_entries(draw) -> p4r.TableEntry:
    table = draw(st.sampled_from([LPM, LPM, ACL, ECMP]))
    entry = p4r.TableEntry(table_id=table)
    if table == LPM:
        prefix, plen = draw(st.sampled_from([(b"\x0a\x00\x01\x00", 24), (b"\x0a\x00\x02\x00", 24),
                                             (b"\x0a\x00\x00\x00", 8), (b"\x0a\x00\x09\x00", 24)]))
        entry.match.add(field_id=1, lpm=p4r.FieldMatch.LPM(value=prefix, prefix_len=plen))
        if draw(st.integers(0, 6)) == 0:  # the default entry instead
            entry.ClearField("match")
            entry.is_default_action = True
            if draw(st.booleans()):
                entry.action.action.CopyFrom(draw(good_actions(DEFAULT_ACTIONS[LPM])))
            return entry
    elif table == ACL:
        entry.priority = draw(ids_1_3)
        entry.match.add(field_id=1, ternary=p4r.FieldMatch.Ternary(value=b"\x0a\x00\x00\x01", mask=draw(
            st.sampled_from([b"\xff\xff\xff\xff", b"\xff\xff\x00\x01"]))))
        if draw(st.booleans()):
            entry.match.add(field_id=2, optional=p4r.FieldMatch.Optional(value=draw(st.sampled_from([b"\x06", b"\x11"]))))
    else:
        entry.match.add(field_id=1, exact=p4r.FieldMatch.Exact(value=bytes([draw(ids_1_3)])))
    if table == ECMP:
        target = draw(st.sampled_from(["member", "group", "set"]))
        if target == "member":
            entry.action.action_profile_member_id = draw(ids_1_3)
        elif target == "group":
            entry.action.action_profile_group_id = draw(ids_1_3)
        else:
            for _ in range(draw(ids_1_3)):
                entry.action.action_profile_action_set.action_profile_actions.add(
                    action=draw(good_actions([SET_NHOP])), weight=1)
    else:
        entry.action.action.CopyFrom(draw(good_actions(ENTRY_ACTIONS[table])))
    return entry


good_entities = st.one_of(
    good_table_entries().map(lambda te: p4r.Entity(table_entry=te)),
    good_table_entries().map(lambda te: p4r.Entity(table_entry=te)),
    st.builds(lambda mid, a: p4r.Entity(action_profile_member=p4r.ActionProfileMember(
        action_profile_id=PROFILES[0], member_id=mid, action=a)), ids_1_3, good_actions([SET_NHOP])),
    st.builds(lambda gid, members: p4r.Entity(action_profile_group=p4r.ActionProfileGroup(
        action_profile_id=PROFILES[0], group_id=gid,
        members=[p4r.ActionProfileGroup.Member(member_id=m, weight=1) for m in members])),
        ids_1_3, st.sets(ids_1_3, max_size=3)),
    st.builds(lambda i, v: p4r.Entity(register_entry=with_index(
        p4r.RegisterEntry(register_id=REGISTERS[0], data={"bitstring": v}), i)),
        st.one_of(st.none(), st.integers(0, 63)), st.binary(min_size=1, max_size=4)),
    st.builds(lambda i, pk: p4r.Entity(counter_entry=with_index(
        p4r.CounterEntry(counter_id=COUNTERS[0], data=p4r.CounterData(packet_count=pk, byte_count=pk * 64)), i)),
        st.one_of(st.none(), st.integers(0, 63)), st.integers(0, 100)),
    st.builds(lambda gid, ports: p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        multicast_group_entry=p4r.MulticastGroupEntry(multicast_group_id=gid,
                                                      replicas=[p4r.Replica(port=bytes([p]), instance=1) for p in ports]))),
        ids_1_3, st.sets(st.integers(1, 8), max_size=3)),
    st.builds(lambda sid, port: p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        clone_session_entry=p4r.CloneSessionEntry(session_id=sid, replicas=[p4r.Replica(egress_port=port)]))),
        ids_1_3, st.integers(1, 8)),
    st.builds(lambda members: p4r.Entity(value_set_entry=p4r.ValueSetEntry(value_set_id=VALUE_SETS[0], members=[
        p4r.ValueSetMember(match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=v))]) for v in members])),
        st.lists(st.sampled_from([b"\x88\x88", b"\x88\x89", b"\x90\x00"]), max_size=3)),
    st.builds(lambda n: p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=DIGESTS[0], config=p4r.DigestEntry.Config(
        max_timeout_ns=10**6, max_list_size=n, ack_timeout_ns=10**9))), st.integers(1, 4)),
)


def good_update(kind: int, entity: p4r.Entity) -> p4r.Update:
    """Cells of externs and default entries always exist: they take MODIFY, and DELETE
    (kept, a well-formed entity with the wrong type) is refused."""
    which = entity.WhichOneof("entity")
    if kind == INSERT and (which in ("counter_entry", "register_entry", "value_set_entry") or entity.table_entry.is_default_action):
        kind = MODIFY
    return p4r.Update(type=kind, entity=entity)


good_updates = st.builds(good_update, st.sampled_from([INSERT, INSERT, MODIFY, DELETE]), good_entities)
updates = st.one_of(good_updates, good_updates, st.builds(lambda kind, e: p4r.Update(type=kind, entity=e), update_types, entities))


@st.composite
def write_requests(draw) -> p4r.WriteRequest:
    # hypothesis favours small integers: 0..15 are the primary's plain requests
    who = ["primary"] * 16 + ["stale", "unset", "other_device", "role"]
    who = who[draw(st.integers(0, len(who) - 1))]
    atomicity = [0] * 16 + [1, 2, 7]
    request = p4r.WriteRequest(device_id=DEVICE_ID, updates=draw(st.lists(updates, min_size=1, max_size=4)),
                               atomicity=atomicity[draw(st.integers(0, len(atomicity) - 1))])
    if who != "unset":
        request.election_id.low = PRIMARY_ID if who in ("primary", "other_device", "role") else draw(st.integers(0, 9))
    if who == "other_device":
        request.device_id = draw(st.integers(0, 5).filter(lambda d: d != DEVICE_ID))
    if who == "role":
        request.role = "nobody"
    return request


json_values = st.recursive(st.none() | st.booleans() | st.integers(-2, 2**40) | st.text(max_size=4),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                           max_leaves=6)


def _slots(node, out: list) -> list:
    """Every (container, key) of a JSON tree, depth first: the places a mutation can hit."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        out.append((node, key))
        _slots(child, out)
    return out


@st.composite
def mutated_bmv2(draw) -> bytes:
    """The fixture's BMv2 JSON with a few values replaced by random JSON."""
    doc = json.loads(DEVICE_CONFIG)
    for _ in range(draw(st.integers(1, 3))):
        slots = _slots(doc, [])
        container, key = slots[draw(st.integers(0, len(slots) - 1))]
        container[key] = draw(json_values)
    return json.dumps(doc).encode()


@st.composite
def pipeline_configs(draw) -> p4r.SetForwardingPipelineConfigRequest:
    """Mostly broken configs; some valid ones (those must then be replayed on the oracle)."""
    p4info = p4i.P4Info()
    p4info.CopyFrom(P4INFO)
    device_config = DEVICE_CONFIG
    how = draw(st.sampled_from(["json", "structure", "structure", "garbage", "sizes", "widths", "names", "valid"]))
    if how == "json":
        device_config = json.dumps(draw(st.recursive(
            st.none() | st.integers() | st.text(max_size=4),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                st.sampled_from(["pipelines", "tables", "actions", "name", "key", "size", "counter_arrays"]), inner, max_size=3),
            max_leaves=12))).encode()
    elif how == "structure":
        device_config = draw(mutated_bmv2())
    elif how == "garbage":
        device_config = overwrite(DEVICE_CONFIG, draw(st.lists(st.tuples(u32, st.integers(0, 255)), min_size=1, max_size=8)))
    elif how == "sizes":
        p4info.counters[0].size = draw(st.integers(0, 2**40))
    elif how == "widths":
        p4info.actions[2].params[draw(st.integers(0, 1))].bitwidth = draw(st.integers(0, 2**31 - 1))
    elif how == "names":
        p4info.tables[draw(st.integers(0, len(TABLES) - 1))].preamble.name = draw(st.text(max_size=8))
    config = p4r.ForwardingPipelineConfig(p4info=p4info, p4_device_config=device_config)
    config.cookie.cookie = draw(st.integers(0, 2**64 - 1))
    action = draw(st.one_of(st.sampled_from([Action.VERIFY, Action.VERIFY_AND_SAVE, Action.VERIFY_AND_COMMIT,
                                              Action.COMMIT, Action.RECONCILE_AND_COMMIT]), st.integers(-1, 9)))
    return p4r.SetForwardingPipelineConfigRequest(device_id=DEVICE_ID, election_id=p4r.Uint128(low=PRIMARY_ID),
                                                  action=action, config=config)


read_requests = st.builds(lambda es, dev: p4r.ReadRequest(device_id=dev, entities=es),
                          st.lists(entities, max_size=3), st.sampled_from([DEVICE_ID] * 5 + [0, 7]))
operations = st.lists(st.one_of(
    write_requests().map(lambda r: ("write", r)),
    write_requests().map(lambda r: ("write", r)),
    write_requests().map(lambda r: ("write", r)),
    st.tuples(write_requests(), st.lists(st.tuples(u32, st.integers(0, 255)), min_size=1, max_size=6)).map(
        lambda t: ("raw_write", overwrite(t[0].SerializeToString(), t[1]))),
    st.binary(max_size=40).map(lambda b: ("raw_write", b)),
    read_requests.map(lambda r: ("read", r)),
    pipeline_configs().map(lambda r: ("pipeline", r)),
), min_size=3, max_size=8)

# -- the two servers ---------------------------------------------------------------------------


def state(rt: Runtime) -> tuple:
    """Everything readable, the default entries and the pipeline cookie."""
    defaults = [p4r.Entity(table_entry=p4r.TableEntry(table_id=t, is_default_action=True)) for t in TABLES]
    config = rt.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(
        device_id=DEVICE_ID, response_type=p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY)).config
    return [e.SerializeToString(deterministic=True) for e in rt.read(*EVERYTHING, *defaults)], config.cookie.cookie


@pytest.fixture(scope="module")
def servers():
    target, oracle = Runtime(engine="native"), Runtime()
    for rt in (target, oracle):
        rt.primary = rt.become_primary(PRIMARY_ID)
    yield target, oracle
    target.close()
    oracle.close()


def _fresh(target: Runtime, oracle: Runtime) -> None:
    """Both servers back to the fixture pipeline with no state (VERIFY_AND_COMMIT clears it)."""
    for rt in (target, oracle):
        rt.set_pipeline(Action.VERIFY_AND_COMMIT, cookie=7)


def _check_status(err: grpc.RpcError, what: str) -> list[p4r.Error]:
    """An error answer is never INTERNAL/UNKNOWN, except a failed batch's UNKNOWN with
    per-update codes (returned) that are neither."""
    code = err.code()
    count("hangs", code == grpc.StatusCode.DEADLINE_EXCEEDED)
    count("crashes", code == grpc.StatusCode.UNAVAILABLE)
    if code == grpc.StatusCode.UNKNOWN and what == "write":
        errors = batch_errors(err)
        count("internal_errors", sum(e.canonical_code in BAD_RPC_CODES for e in errors))
        assert not any(e.canonical_code in BAD_RPC_CODES for e in errors), errors
        return errors
    count("internal_errors", code in BAD_CODES)
    assert code not in BAD_CODES, f"{what}: {code} {err.details()}"
    return []


def _unchanged(target: Runtime, before: tuple, what: str) -> None:
    after = state(target)
    count("corrupted_states", after != before)
    assert after == before, f"a rejected {what} changed the switch"


def _write(target: Runtime, oracle: Runtime, request: p4r.WriteRequest, raw: bytes | None = None) -> None:
    before = state(target)
    try:
        if raw is None:
            target.stub.Write(request, timeout=10)
        else:
            target.channel.unary_unary("/p4.v1.P4Runtime/Write")(raw, timeout=10)
            request = p4r.WriteRequest.FromString(raw)  # it parsed: the server applied it all
        accepted = list(request.updates)
    except grpc.RpcError as err:
        errors = _check_status(err, "write")
        accepted = [u for u, e in zip(request.updates, errors) if e.canonical_code == rpc_code.OK]
    if not accepted:
        _unchanged(target, before, "write")
        return
    for update in accepted:  # the oracle must accept exactly these, one by one
        oracle.write(update, election_id=PRIMARY_ID)


def _pipeline(target: Runtime, oracle: Runtime, request: p4r.SetForwardingPipelineConfigRequest) -> None:
    before = state(target)
    try:
        target.stub.SetForwardingPipelineConfig(request, timeout=30)
    except grpc.RpcError as err:
        _check_status(err, "pipeline")
        _unchanged(target, before, "pipeline config")
        return
    oracle.stub.SetForwardingPipelineConfig(request, timeout=30)


def _probe(rt: Runtime) -> list[tuple[int, bytes]]:
    """Where a few packets go (before any meter is configured both servers agree)."""
    frames = [packet(), packet(dst="10.0.2.9"), packet(src="10.0.0.1", dst="10.0.9.1"), packet(dst="192.168.1.1")]
    return [out for port in (1, 3, CPU_PORT) for frame in frames for out in rt.dataplane.receive(port, frame)]


@FUZZ
@given(ops=operations)
def test_fuzzed_requests_never_break_the_server(servers, ops) -> None:
    target, oracle = servers
    _fresh(target, oracle)
    assert isinstance(target.dataplane.engine, NativeSwitch)
    for kind, request in ops:
        count("requests_fuzzed")
        count("updates_fuzzed", len(request.updates) if kind == "write" else 0)
        if kind == "write":
            _write(target, oracle, request)
        elif kind == "raw_write":
            try:
                parsed = p4r.WriteRequest.FromString(request)
            except Exception:  # noqa: BLE001 - garbage: the server must say INVALID_ARGUMENT
                with pytest.raises(grpc.RpcError) as exc:
                    target.channel.unary_unary("/p4.v1.P4Runtime/Write")(request, timeout=10)
                _check_status(exc.value, "garbage write")
                assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            else:
                _write(target, oracle, parsed, raw=request)
        elif kind == "read":
            try:
                list(target.stub.Read(request, timeout=10))
            except grpc.RpcError as err:
                _check_status(err, "read")
        else:
            _pipeline(target, oracle, request)
    built = state(oracle)
    count("corrupted_states", state(target) != built)
    assert state(target) == built, "the target's state is not what its accepted requests built"
    metered = any(e.meter_entry.HasField("config") for e in oracle.read(p4r.Entity(meter_entry=p4r.MeterEntry())))
    if not metered:  # meters are time-dependent; otherwise forwarding is a function of the state
        assert _probe(target) == _probe(oracle)


# -- the stream ------------------------------------------------------------------------------

stream_messages = st.one_of(
    st.builds(lambda dev, eid, role: p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
        device_id=dev, election_id=p4r.Uint128(low=eid), role=p4r.Role(name=role))),
        st.sampled_from([DEVICE_ID, DEVICE_ID, 0, 9]), st.integers(0, PRIMARY_ID), st.sampled_from(["", "", "x"])),
    st.builds(lambda eid, url, value: p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
        device_id=DEVICE_ID, election_id=p4r.Uint128(low=eid),
        role=p4r.Role(name="fuzz", config=any_pb2.Any(type_url=url, value=value)))),
        st.integers(0, PRIMARY_ID - 1), st.sampled_from(["type.googleapis.com/stratum.P4RoleConfig", "x/y", ""]),
        st.binary(max_size=12)),
    st.builds(lambda payload, md: p4r.StreamMessageRequest(packet=p4r.PacketOut(
        payload=payload, metadata=[p4r.PacketMetadata(metadata_id=i, value=v) for i, v in md])),
        st.binary(max_size=80), st.lists(st.tuples(st.integers(0, 3), values), max_size=3)),
    st.builds(lambda did, lid: p4r.StreamMessageRequest(digest_ack=p4r.DigestListAck(digest_id=did, list_id=lid)),
              some_id(DIGESTS), u32),
    st.just(p4r.StreamMessageRequest()),
)


@settings(FUZZ, max_examples=max(1, EXAMPLES * 2 // 5))
@given(messages=st.lists(stream_messages, min_size=1, max_size=5), from_primary=st.booleans())
def test_fuzzed_stream_messages_never_break_arbitration(servers, messages, from_primary: bool) -> None:
    target, _ = servers
    _fresh(*servers)
    stream = target.primary if from_primary else Stream(target.stub)
    for msg in messages:
        if from_primary and msg.WhichOneof("update") == "arbitration":
            continue  # the primary's own re-arbitration is exercised by the arbitration tests
        stream.send(msg)
        count("requests_fuzzed")
    # a PacketOut with good metadata behind them: every earlier message has been handled
    # (or the stream ended) once it is forwarded or refused
    final = packet(dst="10.0.42.1")
    stream.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=final,
                                                              metadata=[p4r.PacketMetadata(metadata_id=1, value=b"\x05")])))
    deadline = time.monotonic() + 10
    while not any(data == final for _, data in target.dataplane.sent):
        if time.monotonic() > deadline:
            count("hangs")
            pytest.fail("the stream neither forwarded nor refused the last PacketOut")
        item = stream.poll()
        if item is None:
            time.sleep(0.005)
        elif isinstance(item, ClosedByServer):
            raise item
        elif isinstance(item, grpc.RpcError):
            assert not from_primary, f"the primary's stream ended: {item.code()} {item.details()}"
            count("internal_errors", item.code() in BAD_CODES)
            assert item.code() not in BAD_CODES, f"stream ended with {item.code()} {item.details()}"
            break
        elif item.WhichOneof("update") == "error":
            count("internal_errors", item.error.canonical_code in BAD_RPC_CODES)
            assert item.error.canonical_code not in BAD_RPC_CODES, item.error
            if item.error.packet_out.packet_out.payload == final:
                break  # refused (a backup's PacketOut): everything before it was handled
    if not from_primary:
        stream.close()
    # the primary is still the primary: its write goes through
    drop = p4r.TableEntry(table_id=target.table_id("MyIngress.ipv4_lpm"), is_default_action=True)
    drop.action.action.action_id = target.action_id("MyIngress.drop")
    target.write(p4r.Update(type=MODIFY, entity=p4r.Entity(table_entry=drop)), election_id=PRIMARY_ID)
    target.dataplane.sent.clear()
