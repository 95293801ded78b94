"""Ternary priority, registers, multicast, clone, resubmit, recirculate, header
stacks and parser errors on the hand-written fixture `engine_fixtures/features.json`.

Packets: Ethernet (type 0x88b5) / ctl {op:8, arg:8, idx:8, val:16} / tags[2] {v:8}
(tags parsed while op is 0x9X, until a zero tag).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from p4sim.switch import errors
from p4sim.switch.match import Ternary
from p4sim.switch.v1model import V1Switch, run_to_completion

FIXTURE = Path(__file__).parent / "engine_fixtures" / "features.json"
ETH = bytes.fromhex("0000000000aa" "0000000000bb" "88b5")
ANY = Ternary(0, 0)


def pkt(op: int, arg: int = 0, idx: int = 0, val: int = 0, tail: bytes = b"") -> bytes:
    return ETH + struct.pack("!BBBH", op, arg, idx, val) + tail


def ctl(data: bytes) -> tuple[int, int, int, int]:
    return struct.unpack("!BBBH", data[14:19])


@pytest.fixture
def sw() -> V1Switch:
    return V1Switch(json.loads(FIXTURE.read_text()))


def acl(sw: V1Switch, op: Ternary, action: str, args: list[int], prio: int) -> int:
    return sw.table_add("MyIngress.acl", action, [op, ANY], args, prio)


def test_ternary_lowest_priority_value_wins(sw):
    acl(sw, Ternary(0x01, 0xFF), "MyIngress.fwd", [1], 10)
    acl(sw, Ternary(0x00, 0x00), "MyIngress.fwd", [2], 20)
    assert [p for p, _ in run_to_completion(sw, 0, pkt(0x01))] == [1]
    assert [p for p, _ in run_to_completion(sw, 0, pkt(0x02))] == [2]
    acl(sw, Ternary(0x01, 0x01), "MyIngress.fwd", [5], 5)   # odd ops, better priority
    assert [p for p, _ in run_to_completion(sw, 0, pkt(0x01))] == [5]
    assert [p for p, _ in run_to_completion(sw, 0, pkt(0x03))] == [5]
    assert [p for p, _ in run_to_completion(sw, 0, pkt(0x02))] == [2]


def test_ternary_requires_priority_and_rejects_duplicates(sw):
    with pytest.raises(errors.BadMatch, match="priority"):
        sw.table_add("MyIngress.acl", "MyIngress.fwd", [ANY, ANY], [1])
    acl(sw, Ternary(1, 0xFF), "MyIngress.fwd", [1], 3)
    with pytest.raises(errors.DuplicateEntry):
        acl(sw, Ternary(1, 0xFF), "MyIngress.fwd", [2], 3)
    acl(sw, Ternary(1, 0xFF), "MyIngress.fwd", [2], 4)   # other priority: a new entry


def test_register_accumulates_and_is_visible_to_control_plane(sw):
    acl(sw, ANY, "MyIngress.reg_add", [], 1)
    outs = [run_to_completion(sw, 0, pkt(0x10, idx=3, val=v)) for v in (5, 7, 100)]
    assert [ctl(o[0][1])[3] for o in outs] == [5, 12, 112]
    assert sw.register_read("MyIngress.store", 3) == 112
    sw.register_write("MyIngress.store", 3, 0xFFFF)
    (_, out), = run_to_completion(sw, 0, pkt(0x10, idx=3, val=2))
    assert ctl(out)[3] == 1                                # 16-bit wrap-around
    # an index outside the array leaves registers alone and reads nothing (BMv2)
    (_, out), = run_to_completion(sw, 0, pkt(0x10, idx=200, val=9))
    assert ctl(out)[3] == 9
    assert sw.register_size("MyIngress.store") == 16
    with pytest.raises(errors.BadIndex):
        sw.register_read("MyIngress.store", 16)
    sw.register_reset("MyIngress.store")
    assert sw.register_read("MyIngress.store", 3) == 0


def test_multicast_replicates_per_node_with_egress_rid(sw):
    acl(sw, ANY, "MyIngress.mcast", [5], 1)
    sw.mc_mgrp_create(5)
    n1 = sw.mc_node_create(10, [3, 1])
    n2 = sw.mc_node_create(20, [2])
    assert (n1, n2) == (0, 1)
    sw.mc_node_associate(5, n1)
    sw.mc_node_associate(5, n2)
    out = run_to_completion(sw, 0, pkt(0x01))
    assert [(p, ctl(d)[2]) for p, d in out] == [(1, 10), (3, 10), (2, 20)]
    sw.mc_node_dissociate(5, n1)
    assert [p for p, _ in run_to_completion(sw, 0, pkt(0x01))] == [2]
    with pytest.raises(errors.InUse):
        sw.mc_node_associate(5, n2)
    sw.mc_mgrp_destroy(5)
    assert run_to_completion(sw, 0, pkt(0x01)) == []


def test_ingress_clone_carries_preserved_field_list(sw):
    acl(sw, ANY, "MyIngress.clone_fwd", [7, 1], 1)
    assert [p for p, _ in run_to_completion(sw, 0, pkt(0x01, arg=0x11))] == [1]  # no session: no clone
    sw.mirroring_add(7, 9)
    out = run_to_completion(sw, 0, pkt(0x01, arg=0x11))
    assert [(p, ctl(d)[1]) for p, d in out] == [(9, 0x77), (1, 0x11)]
    sw.mirroring_delete(7)
    assert [p for p, _ in run_to_completion(sw, 0, pkt(0x01))] == [1]


def test_resubmit_reparses_with_preserved_metadata(sw):
    acl(sw, ANY, "MyIngress.resub", [], 1)
    out = run_to_completion(sw, 0, pkt(0x01, arg=0))
    assert [(p, ctl(d)[1]) for p, d in out] == [(3, 0x42)]


def test_recirculate_runs_deparsed_packet_through_ingress_again(sw):
    acl(sw, ANY, "MyIngress.recirc_fwd", [2], 1)
    out = run_to_completion(sw, 0, pkt(0x01, val=41))
    # egress added 1 to val and set tag 0x55 (preserved); the second ingress saw
    # instance_type RECIRC and sent it to port 4; recirc_want was reset, so no loop
    assert [(p, ctl(d)[1], ctl(d)[3]) for p, d in out] == [(4, 0x55, 42)]


def test_split_ingress_egress_gives_jobs_per_port(sw):
    acl(sw, ANY, "MyIngress.fwd", [6], 1)
    jobs = sw.run_ingress(0, pkt(0x01))
    assert [j.port for j in jobs] == [6]
    assert sw.run_egress(jobs[0], 3, 2, 1000, 10) == ([(6, pkt(0x01))], [])


def test_header_stack_parsing_and_stack_out_of_bounds(sw):
    acl(sw, ANY, "MyIngress.fwd", [1], 1)
    good = pkt(0x90, tail=b"\x05\x00" + b"payload")
    assert run_to_completion(sw, 0, good) == [(1, good)]
    # three non-zero tags do not fit a 2-element stack: StackOutOfBounds (3), and the
    # packet still goes through ingress, which reports the error code in ctl.val
    (port, out), = run_to_completion(sw, 0, pkt(0x90, tail=b"\x05\x06\x07"))
    assert (port, ctl(out)[3]) == (7, 3)
    # the stack's second tag is cut off: PacketTooShort (1)
    (port, out), = run_to_completion(sw, 0, pkt(0x90, tail=b"\x05"))
    assert (port, ctl(out)[3]) == (7, 1)


def test_stack_pop_and_push_follow_p4_16_semantics(sw):
    acl(sw, Ternary(0x91, 0xFF), "MyIngress.pop_tag", [], 1)
    acl(sw, Ternary(0x92, 0xFF), "MyIngress.push_tag", [9], 2)
    (_, out), = run_to_completion(sw, 0, pkt(0x91, tail=b"\x07\x00" + b"PAY"))
    assert out[19:] == b"\x00PAY"            # tags[1] moved to tags[0], tags[1] invalid
    (_, out), = run_to_completion(sw, 0, pkt(0x92, tail=b"\x07\x00" + b"PAY"))
    assert out[19:] == b"\x09\x07PAY"        # old tags[1] pushed out of the stack


def test_unknown_names_raise_no_such_name(sw):
    for call in (lambda: sw.register_read("nope", 0), lambda: sw.mirroring_delete(3),
                 lambda: sw.counter_read("nope", 0), lambda: sw.parser_value_set_add("x", 1)):
        with pytest.raises(errors.NoSuchName):
            call()
    with pytest.raises(errors.NoSuchEntry):
        sw.mc_node_associate(99, 0)


def test_egress_clone_copies_egress_headers_to_session_port(sw):
    acl(sw, ANY, "MyIngress.fwd", [2], 1)
    sw.mirroring_add(8, 6)
    out = run_to_completion(sw, 0, pkt(0x20, arg=1))
    assert sorted((p, ctl(d)[1]) for p, d in out) == [(2, 0x99), (6, 0x99)]


def test_run_egress_hands_clones_and_recirculations_back_as_jobs(sw):
    acl(sw, Ternary(0x20, 0xFF), "MyIngress.fwd", [2], 1)
    acl(sw, Ternary(0x01, 0xFF), "MyIngress.recirc_fwd", [2], 2)
    sw.mirroring_add(8, 6)
    (job,) = sw.run_ingress(0, pkt(0x20))
    out, jobs = sw.run_egress(job, 0, 0, 0, 0)
    assert [p for p, _ in out] == [2] and [j.port for j in jobs] == [6]
    (job,) = sw.run_ingress(0, pkt(0x01, val=1))
    out, jobs = sw.run_egress(job, 0, 0, 0, 0)
    assert out == [] and [j.port for j in jobs] == [4]
    [(port, data)], more = sw.run_egress(jobs[0], 0, 0, 0, 0)
    assert (port, ctl(data)[3]) == (4, 2) and more == []


def test_egress_job_carries_priority_from_standard_metadata():
    program = json.loads(FIXTURE.read_text())
    fwd = next(a for a in program["actions"] if a["name"] == "MyIngress.fwd")
    fwd["primitives"].append({"op": "assign", "parameters": [
        {"type": "field", "value": ["standard_metadata", "priority"]},
        {"type": "hexstr", "value": "0x5"}]})
    sw = V1Switch(program)
    acl(sw, ANY, "MyIngress.fwd", [6], 1)
    (job,) = sw.run_ingress(0, pkt(0x01))
    assert (job.port, job.priority, job.length) == (6, 5, len(pkt(0x01)))


def test_endless_recirculation_is_dropped_instead_of_hanging():
    # preserving recirc_want makes every pass recirculate again: BMv2 would circulate
    # the packet forever (it never comes out); the engine drops it after MAX_PASSES
    program = json.loads(FIXTURE.read_text())
    program["field_lists"][0]["elements"].append(
        {"type": "field", "value": ["scalars", "userMetadata.recirc_want"]})
    sw = V1Switch(program)
    acl(sw, ANY, "MyIngress.recirc_fwd", [2], 1)
    assert run_to_completion(sw, 0, pkt(0x01)) == []


def test_queueing_metadata_and_timestamps_reach_egress():
    program = json.loads(FIXTURE.read_text())
    stamp = next(a for a in program["actions"] if a["name"] == "MyEgress.stamp")

    def put(dst: str, expr: dict) -> dict:
        return {"op": "assign", "parameters": [{"type": "field", "value": ["ctl", dst]}, expr]}

    def low(field: str, mask: int, minus: str | None = None) -> dict:
        value = {"type": "field", "value": ["standard_metadata", field]}
        if minus:
            value = {"type": "expression", "value": {"op": "-", "left": value, "right": {
                "type": "field", "value": ["standard_metadata", minus]}}}
        return {"type": "expression", "value": {"type": "expression", "value": {
            "op": "&", "left": value, "right": {"type": "hexstr", "value": hex(mask)}}}}
    stamp["primitives"] = [
        put("op", low("enq_qdepth", 0xFF)), put("arg", low("deq_qdepth", 0xFF)),
        put("idx", low("deq_timedelta", 0xFF)),
        put("val", low("egress_global_timestamp", 0xFFFF, minus="ingress_global_timestamp"))]
    now = [100]
    sw = V1Switch(program, clock=lambda: now[0])
    acl(sw, ANY, "MyIngress.fwd", [3], 1)
    (job,) = sw.run_ingress(0, pkt(0x01))
    now[0] = 350
    [(port, out)], more = sw.run_egress(job, 7, 4, 120, 230)
    assert (port, *ctl(out)) == (3, 7, 4, 230, 250) and more == []
