"""GOR's pure logic (no root): alarm hysteresis, elephant ranking from samples, path
planning with projected loads, routing around failed cables (checked on the engine),
the source-port search against the hash model, telemetry arithmetic, the published
topology document, the event log and its loop latencies, a move's verification,
next-path retry and rollback (fake agent and clock), the cable watch, and a tick that
does its switch and agent I/O without holding GOR's lock."""

from __future__ import annotations

import dataclasses
import json
import struct
import threading
from collections import deque
from pathlib import Path
from types import SimpleNamespace
from typing import Iterable

import grpc
import pytest

from controller.alarms import (CRITICAL, NOTICE, OK, WARNING, AlarmBook, AlarmThresholds, LinkSample, SwitchAlarm,
                               SwitchAlarms, parse_alarm)
from controller import cables
from controller.cables import CableWatch, PortReader, after, cable_ends
from controller.events import EventLog, flow_story, loop_latencies, read_events
from controller.agents import AgentFlow
from controller.config import GorConfig, default_config, default_switch_alarms, default_thresholds
from controller import gor as gor_module
from controller.gor import Gor
from controller.views import why_line
from emulation.clock import EmulationClock
from controller.elephants import Sample, SampleWindow, parse_sample
from controller.moves import Move
from controller.paths import candidate_paths, find_port, predict
from controller.publish import publish, topology_document
from controller.telemetry import LinkMap, LinkStats, PfcCounters, Snapshot, link_stats
from controller.routes import cable, ecmp_members, fabric_programs, program_updates, switch_program
from controller.routes import super_members as routes_super_members
from fabric_sim import FabricSim, compiled, install
from p4sim.switch.v1model import V1Switch
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from testkit import wait_for
from topo.addressing import AddressPlan
from topo.hashmodel import FiveTuple, ecmp_index, predict_path
from topo.pipeline import build_pipeline
from topo.spec import FabricSpec, load_spec

THREE_TIER = Path(__file__).resolve().parent.parent / "topo/fabrics/three-tier.yaml"
SPEC = FabricSpec(blocks=2, servers_per_block=2, rails=2, spines=3)
LINK = ("b0l0", "sp0")


def sample(frac: float, q: int, packets: int = 500) -> dict:
    return {LINK: LinkSample(frac, q, packets)}


# --- alarms -------------------------------------------------------------------------

def test_alarm_levels_raise_at_once_and_clear_only_after_quiet_intervals():
    book = AlarmBook(AlarmThresholds(clear_after=3))
    assert book.update(0, sample(0.0, 0)) == []
    (e,) = book.update(1, sample(0.02, 3))
    assert (e.kind, e.level, e.time) == ("raised", NOTICE, 1)
    assert e.name == "alarm_raised" and e.fields() == {"link": "b0l0->sp0", "level": "notice", "previous": "ok",
                                                       "ecn_fraction": 0.02, "queue_depth": 3, "source": "poll"}
    (e,) = book.update(2, sample(0.30, 65))
    assert (e.kind, e.level, e.previous) == ("escalated", CRITICAL, NOTICE)
    # Below the critical raise threshold but above half of it: stays critical.
    assert [book.update(t, sample(0.15, 35)) for t in (3, 4, 5, 6)] == [[], [], [], []]
    assert book.level(LINK) == CRITICAL
    # Quiet for two intervals, then a spike: the count restarts.
    assert book.update(7, sample(0.0, 0)) == [] and book.update(8, sample(0.0, 0)) == []
    assert book.update(9, sample(0.2, 0)) == []
    assert book.update(10, sample(0.0, 0)) == [] and book.update(11, sample(0.0, 0)) == []
    (e,) = book.update(12, sample(0.0, 0))
    assert (e.kind, e.level, e.previous, e.time) == ("cleared", OK, CRITICAL, 12)
    assert book.active() == {}


def test_alarm_lowers_to_the_level_the_quiet_intervals_support():
    book = AlarmBook(AlarmThresholds(clear_after=1))
    book.update(0, sample(0.5, 30))
    (e,) = book.update(1, sample(0.04, 0))   # >= half of warning's 5 %: warning stays possible
    assert (e.kind, e.level) == ("lowered", WARNING)


def test_switch_alarms_raise_at_arrival_and_hold_the_level_against_the_poll():
    """A switch's alarm raises (or escalates) the link at once, with its marks and the
    first mark's time in the event; one at or below the level in force changes nothing;
    lowering is the poll's, after clear_after quiet intervals."""
    book = AlarmBook(AlarmThresholds(clear_after=2))
    assert book.update(1.0, sample(0.0, 0)) == []
    alarm = SwitchAlarm("b0l0", 3, WARNING, 4, 1.2, 1.2035)
    e = book.raise_from_switch(LINK, alarm)
    assert (e.kind, e.level, e.previous, e.time) == ("raised", WARNING, OK, 1.2035)
    assert e.fields() == {"link": "b0l0->sp0", "level": "warning", "previous": "ok", "ecn_fraction": 0.0,
                          "queue_depth": 0, "source": "switch", "marks": 4, "first_mark_t": 1.2, "alarm_ms": 3.5}
    assert book.raise_from_switch(LINK, SwitchAlarm("b0l0", 3, NOTICE, 2, 1.3, 1.3)) is None
    assert book.update(1.5, sample(0.0, 0)) == []          # quiet 1 of 2
    assert book.raise_from_switch(LINK, SwitchAlarm("b0l0", 3, WARNING, 4, 1.6, 1.6)) is None
    (e,) = book.update(1.75, sample(0.0, 0))                # quiet 2 of 2
    assert (e.kind, e.level) == ("cleared", OK)
    e = book.raise_from_switch(LINK, SwitchAlarm("b0l0", 3, CRITICAL, 8, 2.1, 2.2))   # raised again
    assert (e.kind, e.level, book.alarms[LINK].since) == ("raised", CRITICAL, 2.2)


def test_switch_alarm_packet_ins_decode_and_levels_are_checked():
    meta = {"egress_port": 3, "alarm_level": 2, "alarm_marks": 4, "first_mark": 1_500_000, "sampled": 0}
    assert parse_alarm(1.6, "b0l0", meta) == SwitchAlarm("b0l0", 3, WARNING, 4, 1.5, 1.6)
    assert parse_alarm(1.6, "b0l0", {**meta, "alarm_level": 0}) is None      # a sample only
    assert parse_alarm(1.6, "b0l0", {**meta, "alarm_level": 4}) is None      # no such level
    assert parse_alarm(1.6, "b0l0", {"egress_port": 3}) is None
    for bad, match in [(dict(marks=(2, 1, 8)), "marks must be three rising"),
                       (dict(marks=(2, 4, 65)), "marks must be three rising counts in 1..64"),
                       (dict(marks=(0, 4, 8)), "marks"),
                       (dict(windows_s=(0.0, 0.01, 0.01)), "windows_s"),
                       (dict(holdoff_s=0.0), "holdoff_s")]:
        args = dict(marks=(2, 4, 8), windows_s=(0.004, 0.008, 0.008), holdoff_s=0.25) | bad
        with pytest.raises(ValueError, match=match):
            SwitchAlarms(**args)


def test_default_switch_alarms_are_packet_times_of_the_uplinks():
    """Default fabric: 10 Mbit/s uplinks, MTU 4096 -> a full RoCE frame (4096 + 58 bytes) in 3.32 ms; the
    levels 1, 4, 8 marks within 1, 8, 8 of them; GOR's default config carries them,
    with its interval as the hold-off."""
    plan = AddressPlan(FabricSpec(blocks=2, servers_per_block=2, rails=2, spines=2))
    alarms = default_switch_alarms(plan, 0.25)
    assert alarms.marks == (1, 4, 8)
    assert [round(w * 1e3, 2) for w in alarms.windows_s] == [3.32, 26.59, 26.59]
    assert alarms.action_params() == {"notice_marks": 1, "notice_window_us": 3323, "warning_marks": 4,
                                      "warning_window_us": 26586, "critical_marks": 8,
                                      "critical_window_us": 26586, "holdoff_us": 250000}
    assert default_config(plan).switch_alarms == alarms
    assert default_config(plan, interval_s=0.5).switch_alarms.holdoff_s == 0.5
    assert default_config(plan, switch_alarms=None).switch_alarms is None


def test_marked_fraction_of_a_handful_of_packets_is_ignored():
    book = AlarmBook(AlarmThresholds(min_packets=20))
    assert book.update(0, sample(1.0, 0, packets=5)) == []
    assert book.update(1, sample(1.0, 0, packets=50))[0].level == CRITICAL


def test_bad_thresholds_name_the_field():
    with pytest.raises(ValueError, match="queue_depth must be three rising"):
        AlarmThresholds(queue_depth=(10, 5, 20))
    plan = AddressPlan(SPEC)
    assert default_thresholds(plan).queue_depth == (20, 40, 60)      # Kmax 20, queue 64
    small = AddressPlan(FabricSpec(blocks=1, servers_per_block=1, rails=1, spines=1, queue_depth=30))
    assert default_thresholds(small).queue_depth == (20, 29, 30)     # capped by the queue
    with pytest.raises(ValueError, match="clear_ratio"):
        AlarmThresholds(clear_ratio=0)


# --- elephants ----------------------------------------------------------------------

def roce_packet(src: str, dst: str, sport: int, total_len: int) -> bytes:
    eth = bytes(6) + bytes(6) + struct.pack("!H", 0x0800)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 2, total_len, 0, 0, 64, 17, 0,
                     bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    return eth + ip + struct.pack("!HHHH", sport, 4791, total_len - 20, 0) + bytes(12)


def test_samples_decode_and_rank_by_scaled_bytes_on_one_port():
    win = SampleWindow(window_s=1.0, sample_rate=64)
    meta = {"ingress_port": 1, "egress_port": 3, "qdepth": 7, "switch_id": 1}
    big = [parse_sample(0.1 * i, "b0l0", meta, roce_packet("10.0.0.1", "10.0.1.1", 50000, 1086))
           for i in range(6)]
    small = [parse_sample(0.5, "b0l0", meta, roce_packet("10.0.0.2", "10.0.1.2", 50001, 100))] * 3
    other_port = [parse_sample(0.5, "b0l0", {**meta, "egress_port": 4},
                               roce_packet("10.0.0.2", "10.0.1.2", 50002, 1086))] * 9
    assert big[0].flow == FiveTuple("10.0.0.1", "10.0.1.1", 17, 50000, 4791)
    assert (big[0].length, big[0].queue_depth, big[0].egress_port) == (1100, 7, 3)
    win.add(big + small + other_port)
    top = win.top(0.6, "b0l0", 3, n=2)
    assert [e.flow.sport for e in top] == [50000, 50001]
    # Estimated over the flow's life in the window (first sample at 0.0, now 0.6 s).
    assert top[0].bytes == 6 * 1100 * 64 and top[0].rate_bps == pytest.approx(6 * 1100 * 64 * 8 / 0.6)
    assert win.top(0.6, "b0l0", 3, n=1)[0].flow.sport == 50000
    # Later, the first samples leave the window.
    assert [(e.flow.sport, e.samples) for e in win.top(1.35, "b0l0", 3, n=5)] == [(50000, 2), (50001, 3)]
    assert parse_sample(0, "x", meta, b"\x00" * 60) is None


# --- routing around failures, paths and ports --------------------------------------

def test_switch_options_read_the_pipeline_once_and_again_when_it_is_recompiled(tmp_path):
    """Every switch's options share one parsed P4Info and one device config, until the
    compiler writes the files again: then the new ones."""
    from controller.routes import switch_options
    from topo.pipeline import Pipeline

    pipeline = Pipeline(tmp_path / "p.p4info.txtpb", tmp_path / "p.json")
    pipeline.p4info.write_text('pkg_info { name: "first" }\n')
    pipeline.device_config.write_bytes(b'{"program": "first"}')
    plan = AddressPlan(SPEC)
    a, b = (switch_options(pipeline, sw) for sw in plan.switches[:2])
    assert a.p4info is b.p4info and a.p4info.pkg_info.name == "first"
    assert a.p4blob == b'{"program": "first"}' and (a.device_id, b.device_id) == tuple(
        sw.device_id for sw in plan.switches[:2])
    pipeline.p4info.write_text('pkg_info { name: "second" }\n')
    pipeline.device_config.write_bytes(b'{"program": "second"}')
    again = switch_options(pipeline, plan.switches[0])
    assert again.p4info.pkg_info.name == "second" and again.p4blob == b'{"program": "second"}'


def test_no_failures_gives_the_fabric_programs_and_the_hash_model():
    plan = AddressPlan(SPEC)
    from controller import routes
    assert fabric_programs(plan) == {sw.name: routes.switch_program(plan, sw.name) for sw in plan.switches}
    flow = FiveTuple("10.0.0.1", "10.1.1.2", sport=50123)
    assert predict(plan, flow) == predict_path(plan, flow)
    assert len(candidate_paths(plan, flow)) == SPEC.spines


def test_failed_cable_is_routed_around_in_programs_engine_and_model():
    plan = AddressPlan(SPEC)
    down = frozenset({cable("b1l0", "sp1")})
    assert ecmp_members(plan, "b0l0", "b1l0", down) == (0, 2)
    assert ecmp_members(plan, "b0l0", "b1l1", down) == (0, 1, 2)
    assert ecmp_members(plan, "b1l0", "b0l1", down) == (0, 2)
    old, new = switch_program(plan, "b0l0"), switch_program(plan, "b0l0", down)
    assert [(r.prefix, r.size) for r in new.routes if r.group == 2] == [("10.0.1.0/24", 2)]
    # Repair = two next hops of group 2 and the /24, inserted; undoing it deletes them.
    kinds = [(u._update_type.name, u.table_id) for u in program_updates(old, new)]
    assert kinds == [("INSERT", "ecmp_nhop")] * 2 + [("INSERT", "ipv4_lpm")]
    kinds = [(u._update_type.name, u.table_id) for u in program_updates(new, old)]
    assert kinds == [("DELETE", "ipv4_lpm")] + [("DELETE", "ecmp_nhop")] * 2
    assert program_updates(old, old) == []
    # Every flow in the engine fabric follows the model and never crosses the cable.
    sim = FabricSim(plan)
    for name, program in fabric_programs(plan, down).items():
        sim.engines[name] = V1Switch(compiled(plan.spec.ecmp_hash), cpu_port=255)
        install(sim.engines[name], program)
    src, dst = plan.nic("10.0.0.1"), plan.nic("10.0.1.2")
    for sport in range(50000, 50060):
        data = bytes(Ether(src=src.mac, dst=plan.switch(src.leaf).mac) / IP(src=src.ip, dst=dst.ip)
                     / UDP(sport=sport, dport=4791) / Raw(b"x" * 20))
        path, out = sim.send(src.ip, data)
        assert out is not None and path == predict(plan, FiveTuple(src.ip, dst.ip, sport=sport), down)
        assert path[2] != "sp1"


def test_failed_super_spine_cables_are_routed_around_on_the_three_tier_fabric():
    """A spine-super-spine cable down: the spine's group and the other pods' spines
    drop that super-spine for the pod it cut off; with both of a plane's cables to one
    pod down, the leaves stop using that plane across pods. Every cross-pod flow through
    the programmed engines is delivered and never crosses a failed cable; undoing the
    failure gives back the fabric's programs."""
    from fabric_sim import random_flows
    plan = AddressPlan(load_spec(THREE_TIER))
    sp00, sp10 = plan.spine(0, 0).name, plan.spine(1, 0).name
    ss0, ss1 = plan.super_spine(0, 0).name, plan.super_spine(0, 1).name
    one = frozenset({cable(sp10, ss1)})
    assert routes_super_members(plan, sp00, 1, one) == (0,) and routes_super_members(plan, sp10, 0, one) == (0,)
    assert routes_super_members(plan, sp00, 0, one) == (0, 1)
    both = one | {cable(sp10, ss0)}
    leaf0, leaf1 = plan.leaves[0].name, next(l.name for l in plan.leaves if l.pod == 1)
    assert ecmp_members(plan, leaf0, leaf1, both) == (1,) and ecmp_members(plan, leaf0, leaf1, one) == (0, 1)
    for down in (one, both):
        sim = FabricSim(plan)
        for name, program in fabric_programs(plan, down).items():
            sim.engines[name] = V1Switch(compiled(plan.spec.ecmp_hash), cpu_port=255)
            install(sim.engines[name], program)
        crossed = set()
        for flow in random_flows(plan, 200, 7):
            path, _ = sim.send_udp(flow)
            hops = {cable(a, b) for a, b in zip(path, path[1:])}
            assert not hops & down, (flow, path)
            if len(path) == 7:
                crossed.add(path[3])
        # the plane's other super-spine still carries pod 0 <-> pod 1 (one cable down)
        assert plan.super_spine(1, 0).name in crossed and (ss0 in crossed) == (down == one)
    assert fabric_programs(plan, frozenset()) == fabric_programs(plan)


def test_predict_and_find_port_skip_a_dead_super_spine_cable():
    """With spine sp10's cable to ss1 down, spine sp00 hashes pod 0 -> pod 1 flows over
    ss0 alone: the model must predict the programmed engines' path for every flow (some
    would hash onto ss1 on the intact fabric), and a port found for each candidate path
    must land on it in the engines."""
    from fabric_sim import random_flows
    plan = AddressPlan(load_spec(THREE_TIER))
    down = frozenset({cable(plan.spine(1, 0).name, plan.super_spine(0, 1).name)})
    sim = FabricSim(plan)
    for name, program in fabric_programs(plan, down).items():
        sim.engines[name] = V1Switch(compiled(plan.spec.ecmp_hash), cpu_port=255)
        install(sim.engines[name], program)
    rerouted = 0
    for flow in random_flows(plan, 200, 11):
        path, _ = sim.send_udp(flow)
        assert predict(plan, flow, down) == path, flow
        rerouted += predict(plan, flow) != path
    assert rerouted > 0
    a = next(n for s in plan.servers for n in s.nics if plan.pod_of(n.block) == 0)
    b = next(n for s in plan.servers for n in s.nics if plan.pod_of(n.block) == 1 and n.rail == a.rail)
    flow = FiveTuple(a.ip, b.ip, sport=50000)
    paths = candidate_paths(plan, flow, down)
    assert sorted((p[2], p[3]) for p in paths) == [("sp0", "ss0"), ("sp1", "ss2"), ("sp1", "ss3")]
    for path in paths:
        port = find_port(plan, flow, path, down)
        assert sim.send_udp(FiveTuple(a.ip, b.ip, sport=port))[0] == path
    with pytest.raises(ValueError, match="onto"):
        find_port(plan, flow, [a.server, a.leaf, "sp0", "ss1", "sp2", b.leaf, b.server], down)


def test_find_port_lands_on_the_chosen_path_with_and_without_failures():
    plan = AddressPlan(SPEC)
    flow = FiveTuple("10.0.0.1", "10.1.1.1", sport=50000)
    for down in (frozenset(), frozenset({cable("b0l0", "sp2")})):
        paths = candidate_paths(plan, flow, down)
        assert len(paths) == (3 if not down else 2)
        for path in paths:
            port = find_port(plan, flow, path, down, avoid={flow.sport})
            assert 49152 <= port <= 65535 and port != flow.sport
            assert predict(plan, FiveTuple(flow.src, flow.dst, sport=port), down) == path
    with pytest.raises(ValueError, match="onto"):
        find_port(plan, flow, ["b0h0", "b0l0", "sp2", "b1l1", "b1h0"], frozenset({cable("b0l0", "sp2")}))


# --- telemetry arithmetic -------------------------------------------------------------

def test_link_stats_from_counter_snapshots_including_a_restarted_switch():
    plan = AddressPlan(SPEC)
    links = LinkMap(plan)
    up = plan.uplink_port(0)
    assert links.tx[("b0l0", up)] == ("b0l0", "sp0") and links.port_of(("b0l0", "sp0")) == ("b0l0", up)
    assert links.rx[("b0l0", 1)] == ("b0h0", "b0l0")          # NIC -> leaf from the leaf's rx
    assert links.capacity[("b0h0", "b0l0")] == SPEC.links.host_mbps * 1e6
    old = {"b0l0": Snapshot(10.0, tx_packets={up: 100}, tx_bytes={up: 100_000}, ecn={up: 5},
                            rx_packets={1: 50}, rx_bytes={1: 50_000})}
    new = {"b0l0": Snapshot(10.5, tx_packets={up: 300}, tx_bytes={up: 350_000}, ecn={up: 25},
                            rx_packets={1: 80}, rx_bytes={1: 80_000}, max_qdepth={up: 17}, drops={up: 2})}
    stats = link_stats(links, old, new)
    s = stats[("b0l0", "sp0")]
    assert (s.packets, s.ecn_marked, s.queue_depth, s.drops) == (200, 20, 17, 2)
    assert s.bps == pytest.approx(250_000 * 8 / 0.5) and s.ecn_fraction == pytest.approx(0.1)
    assert s.seconds == pytest.approx(0.5)
    assert s.util == pytest.approx(s.bps / (SPEC.links.uplink_mbps * 1e6))
    assert stats[("b0h0", "b0l0")].bps == pytest.approx(30_000 * 8 / 0.5)
    # After a restart the counters start again from zero: the new value is the delta.
    restarted = {"b0l0": Snapshot(11.0, tx_packets={up: 40}, tx_bytes={up: 40_000}, ecn={up: 0})}
    assert link_stats(links, new, restarted)[("b0l0", "sp0")].packets == 40
    assert link_stats(links, {}, new) == {}


def test_link_stats_carry_the_pfc_counters_of_both_ends():
    """leaf -> spine: PAUSE frames the spine sent (received by the leaf's uplink) and how
    long the uplink's queue stood paused; NIC -> leaf: PAUSE frames the leaf sent."""
    plan = AddressPlan(SPEC)
    links = LinkMap(plan)
    up = plan.uplink_port(0)
    stats = {up: {"pfc": {"pause_tx": [0] * 8, "pause_rx": [0, 0, 0, 4, 0, 0, 1, 0],
                          "paused_s": [0, 0, 0, 0.25, 0, 0, 0, 0], "storms": 0}},
             1: {"pfc": {"pause_tx": [0, 0, 0, 9, 0, 0, 0, 0], "pause_rx": [0] * 8,
                         "paused_s": [0.0] * 8, "storms": 0}}}
    base = dict(tx_packets={up: 1}, tx_bytes={up: 1}, rx_packets={1: 1}, rx_bytes={1: 1})
    old = {"b0l0": Snapshot(10.0, **base, pfc={up: PfcCounters(0, 1, 0.05, 0), 1: PfcCounters(2, 0, 0.0, 0)})}
    new = {"b0l0": Snapshot(10.5, **base, pfc={p: PfcCounters.of(st) for p, st in stats.items()})}
    out = link_stats(links, old, new)
    uplink, nic = out[("b0l0", "sp0")], out[("b0h0", "b0l0")]
    assert (uplink.pauses, nic.pauses) == (4, 7)
    assert uplink.paused_s == pytest.approx(0.2) and nic.paused_s == 0.0


# --- what GOR publishes and logs --------------------------------------------------------

def test_published_topology_carries_the_hash_model_and_the_repaired_groups(tmp_path):
    plan = AddressPlan(SPEC)
    doc = topology_document(plan, frozenset({cable("b1l0", "sp1")}), version=3)
    path = publish(tmp_path, doc)
    back = json.loads(path.read_text())
    assert back["version"] == 3 and back["hash"]["algorithm"] == "crc32"
    assert back["hash"]["salts"]["b0l0"] == plan.switch("b0l0").salt
    assert sum(width for _, width in back["hash"]["fields"]) == 17 * 8   # the 17-byte field list
    assert back["down"] == [["b1l0", "sp1"]]
    assert back["groups"]["b0l0"]["b1l0"] == [0, 2] and back["groups"]["b0l0"]["b1l1"] == [0, 1, 2]
    # An agent can predict a path from the document alone, as the data plane routes it.
    flow = FiveTuple("10.0.0.1", "10.0.1.1", sport=50321)
    members = back["groups"]["b0l0"]["b1l0"]
    k = members[ecmp_index(back["hash"]["algorithm"], back["hash"]["salts"]["b0l0"], flow, len(members))]
    assert predict(plan, flow, frozenset({cable("b1l0", "sp1")}))[2] == f"sp{k}"


def test_event_log_lines_and_loop_latencies(tmp_path):
    times = iter([1.0, 1.5, 1.7, 2.0, 2.1])
    log = EventLog(tmp_path / "ev.jsonl", clock=lambda: next(times))
    log.emit("detect", loop=1)
    log.emit("alarm_raised", link="a->b")
    log.emit("moved", loop=1)
    log.emit("detect", loop=2, t=1.9)
    log.emit("cleared", loop=1)
    log.close()
    records = read_events(tmp_path / "ev.jsonl")
    assert [r["event"] for r in records] == ["detect", "alarm_raised", "moved", "detect", "cleared"]
    assert all(isinstance(r["ts"], float) for r in records) and records[3]["t"] == 1.9
    assert loop_latencies(records) == {1: pytest.approx(0.7)}
    assert loop_latencies(records, end="cleared") == {1: pytest.approx(1.1)}


def test_gor_config_rejects_bad_values_by_name():
    with pytest.raises(ValueError, match="interval_s must be > 0"):
        GorConfig(interval_s=0)
    with pytest.raises(ValueError, match="safety must be in"):
        GorConfig(safety=1.5)
    with pytest.raises(ValueError, match="act_level"):
        GorConfig(act_level=0)


# --- the move state machine (fake agent, fake clock, no switches) ----------------------

class StoppedClock:
    """An emulation clock that a test moves by hand (``now[0]``): GOR reads it through
    `now`, and its loop would wait on it through `wait` (the tests call `tick`)."""

    def __init__(self, now: list[float]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now[0]

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.is_set()


class FakeAgents:
    """Records port changes; answers like the agent's control channel."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def set_source_port(self, server: str, qpn: int, sport: int, timeout_s: float) -> object:
        self.calls.append((server, qpn, sport))
        return SimpleNamespace(waited_s=0.01, received_s=0.0, applied_s=0.01)

    def flows(self) -> tuple[set, list]:
        return set(), []

    def close(self) -> None:
        pass


def advance_moves(gor: Gor, now: list[float], seconds: float) -> list[dict]:
    """Let the agents' answers arrive, move the stopped clock on by ``seconds`` and the
    moves with it; the events that caused."""
    before = len(gor.events.snapshot())
    for m in gor.mover.moves:
        if m.future is not None:
            m.future.result(5)
    now[0] += seconds
    gor.mover.advance(now[0])
    return gor.events.snapshot()[before:]


def test_a_move_is_verified_from_samples_else_the_next_path_else_rolled_back(tmp_path):
    plan = AddressPlan(SPEC)
    now = [100.0]
    gor = Gor(plan, build_pipeline(SPEC), tmp_path, clock=StoppedClock(now), agents=FakeAgents())
    src, dst = plan.nic("10.0.0.1"), plan.nic("10.0.1.1")
    old = find_port(plan, FiveTuple(src.ip, dst.ip), candidate_paths(plan, FiveTuple(src.ip, dst.ip))[0])
    gor._refresh_agent_flows({"b0h0"}, [AgentFlow("b0h0", 7, src.ip, dst.ip, old, 4791, 1000, 5e6, "active")],
                             now[0])
    flow = gor.flow("10.0.0.1:%d->10.0.1.1" % old)
    paths = candidate_paths(plan, flow.five_tuple)
    assert [p[2] for p in paths] == ["sp0", "sp1", "sp2"]

    def step(seconds: float) -> list[str]:
        return [e["event"] for e in advance_moves(gor, now, seconds)]

    # By hand to sp2: the agent's answer (the flow sends on the new port) is the move;
    # a sample of the new 5-tuple leaving b0l0 towards sp2 verifies it.
    # The move is dated when the answer arrived, not when the moves were next advanced.
    move = gor.reroute(flow, paths[2])
    answered_at = now[0]
    assert gor.agents.calls[-1][:2] == ("b0h0", 7) and move.sport != old
    events = advance_moves(gor, now, 0.1)
    assert [e["event"] for e in events] == ["commanded", "moved"] and not move.done.is_set()
    assert events[1]["by"] == "agent" and flow.moved_at == events[1]["t"] == answered_at
    new = FiveTuple(src.ip, dst.ip, sport=move.sport)
    gor.samples.add([Sample(now[0], "b0l0", 1, plan.uplink_port(2), 0, new, 1000)])
    events = advance_moves(gor, now, 0.1)
    assert [e["event"] for e in events] == ["verified"] and move.done.is_set() and move.outcome == "moved"
    assert events[0]["latency_s"] == pytest.approx(0.2)
    assert flow.sport == move.sport and predict(plan, new)[2] == "sp2"
    # Automatically off an alarmed link, two accepted paths, the data plane never shows
    # the flow on either: the second path is tried, then the old port comes back.
    start = flow.sport
    auto = Move(99, flow, start, ("b0l0", "sp2"), tuple(paths[2]), 5e6, [tuple(paths[0]), tuple(paths[1])], now[0])
    gor.mover.command(auto)
    assert step(0.1) == ["commanded", "moved"]
    assert step(gor.config.verify_s + 0.1) == ["not_verified", "command"]
    assert step(0.1) == ["commanded", "moved"]
    assert step(gor.config.verify_s + 0.1) == ["not_verified", "rolled_back"]
    assert auto.outcome == "failed" and flow.sport == start
    gor.mover._pool.shutdown(wait=True)         # the rollback call runs in a worker too
    assert gor.agents.calls[-1] == ("b0h0", 7, start)
    gor.events.close()


def test_a_move_that_does_not_clear_its_link_retries_the_next_simulated_path(tmp_path):
    """Off an alarmed link with two ranked paths: the flow is shown on the first, the
    link stays alarmed past clear_s -- ``not_cleared``, the rate measured there beside
    the prediction, a ``retry`` on the second; shown there and the alarm clears:
    ``cleared`` and its measurement."""
    plan = AddressPlan(SPEC)
    now = [100.0]
    gor = Gor(plan, build_pipeline(SPEC), tmp_path, clock=StoppedClock(now), agents=FakeAgents())
    src, dst = plan.nic("10.0.0.1"), plan.nic("10.0.1.1")
    paths = [tuple(p) for p in candidate_paths(plan, FiveTuple(src.ip, dst.ip))]
    old = find_port(plan, FiveTuple(src.ip, dst.ip), list(paths[2]))
    gor._refresh_agent_flows({"b0h0"}, [AgentFlow("b0h0", 7, src.ip, dst.ip, old, 4791, 1000, 5e6, "active")],
                             now[0])
    flow = gor.flow("10.0.0.1:%d->10.0.1.1" % old)
    hot = ("b0l0", "sp2")
    gor.alarms.raise_from_switch(hot, SwitchAlarm("b0l0", plan.uplink_port(2), NOTICE, 1, now[0], now[0]))

    def step(seconds: float) -> list[dict]:
        return advance_moves(gor, now, seconds)

    def shown_on(path: tuple[str, ...], n: int = 1) -> None:
        """``n`` samples of the flow's current 5-tuple leaving b0l0 towards the path's spine."""
        ft = FiveTuple(src.ip, dst.ip, sport=flow.sport)
        gor.samples.add([Sample(now[0] - 0.01 * i, "b0l0", 1, plan.uplink_port(int(path[2][2:])), 0, ft, 1000)
                         for i in range(n)])

    move = Move(1, flow, old, hot, paths[2], 10e6, [paths[0], paths[1]], now[0],
                predicted={paths[0]: 6e6, paths[1]: 4e6})
    gor.mover.command(move)
    assert [e["event"] for e in step(0.1)] == ["commanded", "moved"]
    shown_on(paths[0])
    assert [e["event"] for e in step(0.1)] == ["verified"]
    assert step(gor.config.clear_s - 0.5) == []
    shown_on(paths[0], 4)                      # the samples of the last window measure it
    events = step(0.6)
    assert [e["event"] for e in events] == ["not_cleared", "measured", "retry", "command"]
    measured, retry = events[1], events[2]
    assert measured["predicted_mbps"] == 6.0 and measured["samples"] == 4 and measured["measured_mbps"] > 0
    assert (retry["round"], retry["path"]) == (1, "-".join(paths[1]))
    assert [e["event"] for e in step(0.1)] == ["commanded", "moved"]
    shown_on(paths[1])
    assert [e["event"] for e in step(0.1)] == ["verified"]
    for t in range(gor.config.thresholds.clear_after):
        gor.alarms.update(now[0] + t, {hot: LinkSample(0.0, 0, 500)})
    events = step(0.1)
    assert [e["event"] for e in events] == ["cleared", "measured"]
    assert events[1]["predicted_mbps"] == 4.0 and events[1]["path"] == "-".join(paths[1])
    assert move.outcome == "cleared" and predict(plan, flow.five_tuple)[2] == "sp1"
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_a_new_jobs_qp_with_a_reused_number_is_a_new_flow(tmp_path):
    """QP numbers repeat from job to job; the QP's creation time tells them apart, so a
    flow GOR just moved (cooling down) does not make the next job's flow wait."""
    plan = AddressPlan(SPEC)
    gor = Gor(plan, build_pipeline(SPEC), tmp_path, clock=StoppedClock([100.0]))
    src, dst = plan.nic("10.0.0.1"), plan.nic("10.0.1.1")

    def listed(created_ns: int, nbytes: int) -> list[AgentFlow]:
        return [AgentFlow("b0h0", 7, src.ip, dst.ip, 50000, 4791, nbytes, 5e6, "active", created_ns)]

    gor._refresh_agent_flows({"b0h0"}, listed(1, 1000), 100.0)
    first = gor.flow("10.0.0.1:50000->10.0.1.1")
    first.moved_at = 99.0
    gor._refresh_agent_flows({"b0h0"}, listed(1, 900_000), 100.5)
    assert gor.flow("10.0.0.1:50000->10.0.1.1") is first          # the same QP, more bytes
    # The next job: more bytes already than the old QP had at its last listing.
    gor._refresh_agent_flows({"b0h0"}, listed(2, 2_000_000), 101.0)
    second = gor.flow("10.0.0.1:50000->10.0.1.1")
    assert second is not first and second.moved_at == float("-inf") and second.bytes == 2_000_000
    gor.events.close()


# --- cables, and what a tick does outside the lock -------------------------------------

class ReportedPorts:
    """Stand-in for the switches' port reports (`controller.cables.PortReader`): every
    end of every switch-switch cable reports up, but the ends in ``down``."""

    def __init__(self, plan: AddressPlan, down: Iterable[tuple[str, int]] = ()) -> None:
        self.state = {end: True for end in cable_ends(plan)}
        self.state.update({end: False for end in down})

    def read(self) -> dict[tuple[str, int], bool]:
        return dict(self.state)

    def close(self) -> None:
        pass


def test_cable_watch_reads_the_switches_reports_and_reports_changes():
    """Leaf-spine and spine-super-spine cables alike, by the ports the switches at their
    ends report: one end down fails a cable, an end not reported tells nothing unless
    the other end is down, a dead switch's cables are down."""
    plan = AddressPlan(load_spec(THREE_TIER))
    watch = CableWatch(plan)
    assert {frozenset((a, b)) for a, b, *_ in watch.cables} == {cable(l.a, l.b) for l in plan.switch_links}
    assert {plan.switch(a).role + "-" + plan.switch(b).role for a, b, *_ in watch.cables} == \
        {"leaf-spine", "spine-superspine"}
    sp, ss = plan.spine(1, 0).name, plan.super_spine(0, 1).name
    ports = ReportedPorts(plan, [(ss, plan.super_port(1))]).state       # ss's end of sp-ss
    leaf = plan.leaves[0]
    del ports[(leaf.name, plan.uplink_port(1))]                          # not reported ...
    changes = watch.changes(frozenset(), ports)
    assert [(c.name, c.up) for c in changes] == [(f"{sp}-{ss}", False)]
    down = after(frozenset(), changes)
    assert down == {cable(sp, ss)} and watch.changes(down, ports) == []
    ports[(plan.spine(0, 1).name, plan.spine_port(leaf.block, leaf.rail))] = False   # ... the other end down
    assert [(c.name, c.up) for c in watch.changes(down, ports)] == [(f"{leaf.name}-{plan.spine(0, 1).name}", False)]
    ports = ReportedPorts(plan).state
    back = watch.changes(down, ports)
    assert [(c.name, c.up) for c in back] == [(f"{sp}-{ss}", True)] and after(down, back) == frozenset()
    dead = watch.changes(frozenset(), ports, frozenset({ss}))
    assert sorted(c.name for c in dead) == sorted(f"{plan.spine(pod, 0).name}-{ss}" for pod in range(2))


class StatusClient:
    """A switch's QueueControl client: its port status, or an RpcError with ``code``."""

    def __init__(self, status: dict[int, bool] | None = None, code: grpc.StatusCode | None = None) -> None:
        self.status, self.code, self.calls = status, code, 0

    def port_status(self) -> dict[int, bool]:
        self.calls += 1
        if self.code is not None:
            error = grpc.RpcError()
            error.code = lambda: self.code  # type: ignore[attr-defined]
            raise error
        assert self.status is not None
        return self.status


def test_port_reader_asks_the_switches_and_reads_sys_only_for_a_switch_without_the_service(tmp_path, monkeypatch):
    """A p4sim switch's ports come from its answer (never this machine's /sys); a switch
    that does not answer tells nothing; BMv2 (UNIMPLEMENTED) falls back to /sys, and is
    not asked again."""
    plan = AddressPlan(SPEC)
    leaf, spine = plan.leaves[0].name, plan.spines[0].name
    up_intf = plan.intf(spine, plan.spine_port(0, 1))
    (tmp_path / up_intf).mkdir()
    (tmp_path / up_intf / "operstate").write_text("down\n")
    monkeypatch.setattr(cables, "SYSFS_NET", tmp_path)
    clients = {sw.name: StatusClient({}) for sw in plan.switches}
    clients[leaf] = StatusClient({plan.uplink_port(0): False, plan.uplink_port(1): True})
    clients[spine] = StatusClient(code=grpc.StatusCode.UNIMPLEMENTED)
    clients[plan.spines[1].name] = StatusClient(code=grpc.StatusCode.UNAVAILABLE)
    reader = PortReader(plan, clients)
    try:
        first = reader.read()
        assert first == {(leaf, plan.uplink_port(0)): False, (leaf, plan.uplink_port(1)): True,
                         (spine, plan.spine_port(0, 1)): False}
        assert reader.read() == first and clients[spine].calls == 1
    finally:
        reader.close()


def lock_free(lock: threading.RLock) -> bool:
    """Whether a thread other than the caller could take ``lock`` now."""
    free: list[bool] = []

    def probe() -> None:
        if lock.acquire(blocking=False):
            lock.release()
            free.append(True)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return bool(free)


class LockCheckingAgents(FakeAgents):
    """Notes, for every flow listing, whether it ran off the thread that ticks: the
    loop never waits for an agent, and the listing thread does nothing but list, so it
    never holds GOR's lock either."""

    def __init__(self) -> None:
        super().__init__()
        self.listings: list[bool] = []

    def flows(self) -> tuple[set, list]:
        self.listings.append(threading.current_thread() is not threading.main_thread())
        return set(), []


def test_a_tick_lists_agents_and_writes_switches_without_holding_the_lock(tmp_path):
    """Tick 1: a cable goes down (route repair: switch writes) and the periodic agent
    listing; tick 2: an alarmed link's elephant no agent lists (a listing at once)."""
    plan = AddressPlan(SPEC)
    now = [100.0]
    agents = LockCheckingAgents()
    gor = Gor(plan, build_pipeline(SPEC), tmp_path, clock=StoppedClock(now), agents=agents)
    writes: list[bool] = []
    gor.fleet.write = lambda updates, timeout=10.0: writes.append(lock_free(gor.lock))  # type: ignore[method-assign]
    gor.fleet.is_up = lambda name: True  # type: ignore[method-assign]
    gor.ports = ReportedPorts(plan, [("b1l1", plan.uplink_port(2))])  # type: ignore[assignment]
    links = LinkMap(plan)
    hot = LinkStats(LINK, links.capacity[LINK], 0.25, 0.95 * links.capacity[LINK], 1000, 250, 50, 60, 0)
    gor.telemetry = SimpleNamespace(links=links, latest={LINK: hot},  # type: ignore[assignment]
                                    poll=lambda clock, min_interval=0.0: {LINK: hot},
                                    storms=[("b0l0", 3, 1)])
    gor.tick()
    assert gor.down == {cable("b1l1", "sp2")} and gor.routes.version == 1
    storms = [e for e in gor.events.snapshot() if e["event"] == "pfc_storm"]
    assert [(e["switch"], e["port"], e["storms"]) for e in storms] == [("b0l0", 3, 1)]
    assert gor.telemetry.storms == []
    # The listing runs on GOR's listing thread: wait for it (with a timeout).
    wait_for("the first listing", lambda: len(agents.listings) == 1, 5)
    # The repair's two writes (the leaves, then sp2: controller/repair.py), both lock-free.
    assert writes == [True, True] and agents.listings == [True]
    elephant = FiveTuple("10.0.0.1", "10.0.1.1", sport=50000)
    for i in range(4):
        gor._incoming.put(Sample(100.2 + 0.1 * i, "b0l0", 1, plan.uplink_port(0), 0, elephant, 1000))
    now[0] = 100.6
    gor.tick()
    wait_for("the second listing", lambda: len(agents.listings) == 2, 5)
    assert agents.listings == [True, True]
    # Tick 1's loop finds no flow at all, tick 2's the elephant no agent can move.
    assert [e["event"] for e in gor.events.snapshot() if e["event"] in ("detect", "skip", "failed")] == \
        ["detect", "failed", "detect", "skip", "failed"]
    gor.events.close()


def test_a_new_sender_is_listed_at_the_next_tick_before_any_alarm(tmp_path):
    """A job starting: a data frame of a flow no listing named, sampled after the last
    listing went out, has the agents listed at the next tick though no link is alarmed
    (so the alarm that follows finds its flows movable); an ACK-sized frame of another
    new flow does not, and a flow the new listing did not name either is not asked
    about again."""
    plan = AddressPlan(SPEC)
    now = [100.0]
    agents = LockCheckingAgents()
    gor = Gor(plan, build_pipeline(SPEC), tmp_path, clock=StoppedClock(now), agents=agents)
    gor.fleet.is_up = lambda name: True  # type: ignore[method-assign]
    gor.ports = ReportedPorts(plan)  # type: ignore[assignment]
    links = LinkMap(plan)
    cool = LinkStats(LINK, links.capacity[LINK], 0.25, 0.1 * links.capacity[LINK], 100, 25, 0, 0, 0)
    gor.telemetry = SimpleNamespace(links=links, latest={LINK: cool},  # type: ignore[assignment]
                                    poll=lambda clock, min_interval=0.0: {LINK: cool}, storms=[])
    gor.tick()
    wait_for("the first listing", lambda: len(agents.listings) == 1, 5)
    ack = FiveTuple("10.0.0.2", "10.0.1.2", sport=50001)
    gor._incoming.put(Sample(100.1, "b0l0", 1, plan.uplink_port(0), 0, ack, 62))
    now[0] = 100.25
    gor.tick()
    sender = FiveTuple("10.0.0.1", "10.0.1.1", sport=50000)
    gor._incoming.put(Sample(100.3, "b0l0", 1, plan.uplink_port(0), 0, sender, 4154))
    now[0] = 100.5
    gor.tick()
    wait_for("the listing for the new sender", lambda: len(agents.listings) == 2, 5)
    gor._incoming.put(Sample(100.6, "b0l0", 1, plan.uplink_port(0), 0, sender, 4154))
    now[0] = 100.75
    gor.tick()
    assert gor._listing is None and len(agents.listings) == 2     # none asked for
    assert not [e for e in gor.events.snapshot() if e["event"] == "detect"]
    gor.events.close()


def test_a_switch_that_stops_answering_is_routed_around_within_a_tick_and_back(tmp_path):
    """sp1's P4Runtime session breaks: the next tick counts each of its cables down
    (``switch_down``, ``link_down``), the leaves' groups drop it -- written to every
    switch whose routes change but the dead one --; when it answers again (its re-push
    wakes the loop for a tick at once) its cables come back and it is written too."""
    plan = AddressPlan(SPEC)
    now = [100.0]
    gor = Gor(plan, build_pipeline(SPEC), tmp_path, clock=StoppedClock(now), agents=FakeAgents())
    written: list[set[str]] = []
    gor.fleet.write = lambda updates, timeout=10.0: written.append({n for n, u in updates.items() if u})  # type: ignore[method-assign]
    dead = {"sp1"}
    gor.fleet.is_up = lambda name: name not in dead  # type: ignore[method-assign]
    gor.ports = ReportedPorts(plan)  # type: ignore[assignment]    # every port stays up
    gor.telemetry = SimpleNamespace(links=LinkMap(plan))  # type: ignore[assignment]
    leaves = [leaf.name for leaf in plan.leaves]
    gor._check_cables()
    names = [(e["event"], e.get("switch") or e.get("link")) for e in gor.events.snapshot()]
    assert names[0] == ("switch_down", "sp1") and sorted(names[1:5]) == [("link_down", f"{l}-sp1") for l in leaves]
    assert gor.down == {cable(l, "sp1") for l in leaves}
    assert written == [set(leaves)]                             # the leaves' groups; sp1 not written
    assert all(1 not in ecmp_members(plan, a, b, gor.down) for a in leaves for b in leaves if a != b)
    assert gor._program("sp1") == dataclasses.replace(switch_program(plan, "sp1", gor.down),
                                                      alarms=gor.config.switch_alarms)  # its re-push
    gor._check_cables()                                         # still dead: nothing new
    assert len(written) == 1
    gor._on_push("b0l0")                                        # a live switch pushed: no hurry
    assert not gor._wake.is_set()
    dead.clear()
    gor._on_push("sp1")                                         # back and re-pushed: a tick now
    assert gor._wake.is_set() and gor._between_ticks(now[0] + 0.25) == "tick"
    before = len(gor.events.snapshot())
    gor._check_cables()
    names = [(e["event"], e.get("switch") or e.get("link")) for e in gor.events.snapshot()[before:]]
    assert names[0] == ("switch_up", "sp1") and sorted(names[1:5]) == [("link_up", f"{l}-sp1") for l in leaves]
    # sp1 gets its routes back before the leaves put it in their groups again.
    assert gor.down == frozenset() and written[-2:] == [{"sp1"}, set(leaves)]
    gor.events.close()


def test_a_switch_alarm_wakes_the_loop_at_once(tmp_path):
    """A PacketIn carrying an alarm of a fabric link that raises its level wakes GOR's
    loop, which probes the link at once (not at the next interval's poll: its
    utilisation, `_probe`) and reacts when the probe shows the load; one that raises
    nothing, or raises a NIC link (moving flows cannot relieve it), does not; a
    sample-only PacketIn of a listed flow waits for the tick. GOR programs its alarm
    levels into every switch."""
    plan = AddressPlan(SPEC)
    now = [100.0]
    gor = Gor(plan, build_pipeline(SPEC), tmp_path, clock=SteppingClock(now), agents=FakeAgents())
    assert gor._program("b0l0").alarms == gor.config.switch_alarms == default_switch_alarms(plan, 0.25)
    gor.telemetry = SimpleNamespace(links=LinkMap(plan))  # type: ignore[assignment]
    reads = probe_shows(gor, now, 0.95)
    up0 = plan.uplink_port(0)

    def packet_in(port: int, level: int, sampled: int = 0) -> SimpleNamespace:
        return SimpleNamespace(metadata={"egress_port": port, "alarm_level": level, "alarm_marks": 4,
                                         "first_mark": 99_990_000, "sampled": sampled, "ingress_port": 1},
                               payload=roce_packet("10.0.0.1", "10.0.1.1", 50000, 1086))

    gor._listed_tuples = frozenset({("10.0.0.1", "10.0.1.1", 50000)})
    gor._on_packet("b0l0", packet_in(up0, 0, sampled=1))
    assert not gor._wake.is_set() and gor._incoming.qsize() == 1
    gor._on_packet("b0l0", packet_in(up0, WARNING))
    assert gor._wake.is_set() and gor._incoming.qsize() == 1
    assert gor._take_switch_alarms() == "" and gor._probing == {("b0l0", "sp0")}
    gor._prober.shutdown(wait=True)
    assert reads == [("b0l0", up0)] * 2 and gor._probed.is_set()
    assert gor._between_ticks(now[0] + 0.25) == "react"          # the probe showed the load: now
    (raised,) = [e for e in gor.events.snapshot() if e["event"] == "alarm_raised"]
    assert (raised["link"], raised["level"], raised["source"], raised["alarm_ms"]) == \
        ("b0l0->sp0", "warning", "switch", 10.0)
    gor._on_packet("b0l0", packet_in(up0, NOTICE))               # below the level in force
    assert gor._take_switch_alarms() == ""
    nic = plan.server_at(0, 0).nics[0]
    gor._on_packet("b0l0", packet_in(nic.leaf_port, CRITICAL))   # a NIC link: alarmed, not acted on
    assert gor._take_switch_alarms() == "" and gor.alarms.level(LinkMap(plan).tx[("b0l0", nic.leaf_port)]) == CRITICAL
    gor._on_packet("b0l0", packet_in(up0, CRITICAL))
    # Escalated, its load measured a moment ago: a reaction, no second probe.
    assert gor._take_switch_alarms() == "react" and gor.alarms.level(("b0l0", "sp0")) == CRITICAL
    assert len(reads) == 2
    gor.events.close()


class ListingAgents(FakeAgents):
    """Agents that list the given flows (and record port changes)."""

    def __init__(self, listing: list[AgentFlow]) -> None:
        super().__init__()
        self.listing = listing

    def flows(self) -> tuple[set, list]:
        return {f.server for f in self.listing}, list(self.listing)


def gor_on_hot_uplink(plan: AddressPlan, spec: FabricSpec, run_dir, now: list[float], agents: FakeAgents,
                      tuples: list[FiveTuple], listed: bool = True, clock: StoppedClock | None = None,
                      quiet: bool = False, **settings) -> Gor:
    """A GOR on a stopped clock whose agents list their flows (already, when
    ``listed``: planned then, so the listings that follow plan nothing), whose telemetry shows b0l0's uplink to sp0 (`LINK`) at 95 % with ECN
    marks (``quiet``: at 30 %, no mark) and whose samples show ``tuples`` leaving by
    it; one tick run."""
    gor = Gor(plan, build_pipeline(spec), run_dir, clock=clock or StoppedClock(now), agents=agents)
    if listed:
        gor._refresh_agent_flows(*agents.flows(), now[0])     # what the listing thread brings in
        # ... and planned when they were first listed (`Gor._plan_listed`, whose own
        # test is its own): what is left is the alarms'.
        gor._planned |= {f.id for f in gor.flows}
    gor.fleet.is_up = lambda name: True  # type: ignore[method-assign]
    gor.ports = ReportedPorts(plan)  # type: ignore[assignment]
    if settings:
        gor.configure(**settings)
    links = LinkMap(plan)
    hot = LinkStats(LINK, links.capacity[LINK], 0.25, 0.95 * links.capacity[LINK], 1000, 250, 50, 60, 0) \
        if not quiet else LinkStats(LINK, links.capacity[LINK], 0.25, 0.3 * links.capacity[LINK], 300, 75, 0, 2, 0)
    gor.telemetry = SimpleNamespace(links=links, latest={LINK: hot},  # type: ignore[assignment]
                                    poll=lambda clock, min_interval=0.0: {LINK: hot}, storms=[])
    for i in range(3):
        for ft in tuples:
            gor._incoming.put(Sample(now[0] - 0.5 + 0.1 * i, "b0l0", 1, plan.uplink_port(0), 0, ft, 4000))
    gor.tick()
    return gor


@pytest.mark.parametrize("top_n, scope", [(2, "elephants"), (1, "all movable flows")])
def test_a_tick_places_every_elephant_of_the_alarmed_region_at_once(tmp_path, top_n, scope):
    """Two connections of two QPs each leave b0l0, all four on sp0 (200 % of the
    uplink by their demands, 5 Mbit/s each: half a NIC per QP). One reroute loop moves
    two of them to sp1 -- a move per flow, commanded in the same tick. The top two
    elephants are moved first; with only the top one named, moving it alone leaves
    three QPs on sp0 (1.5x the step), so the model takes the placement of every
    movable flow."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    now = [100.0]
    senders = [(plan.server_at(0, s).nics[0], plan.server_at(1, s).nics[0]) for s in (0, 1)]
    listing, tuples = [], []
    for k, (src, dst) in enumerate(senders):
        for qp in range(2):
            ft = FiveTuple(src.ip, dst.ip, sport=49152 + 1000 * k + 100 * qp)
            sport = find_port(plan, ft, candidate_paths(plan, ft)[0])
            listing.append(AgentFlow(src.server, 10 * k + qp, src.ip, dst.ip, sport, 4791, 1000, 5e6, "active"))
            tuples.append(FiveTuple(src.ip, dst.ip, sport=sport))
    agents = ListingAgents(listing)
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, agents, tuples, top_n=top_n)
    decide = [e for e in gor.events.snapshot() if e["event"] == "decide"]
    assert len(decide) == 1, gor.events.snapshot()
    d = decide[0]
    assert d["scope"] == scope
    (detect,) = [e for e in gor.events.snapshot() if e["event"] == "detect"]
    if scope == "elephants":
        assert {m["flow"] for m in d["moves"]} == {e["flow"] for e in detect["elephants"]}
    assert (d["worst_before"], d["worst_after"]) == (2.0, 1.0)
    assert [m["demand_mbps"] for m in d["moves"]] == [5.0, 5.0]
    assert {m["path"].split("-")[2] for m in d["moves"]} == {"sp1"}
    # Simulated: the placement first (each QP at its demand, the uplinks full), then
    # either move alone (three QPs on sp0: 10/3 each, 1.5x), the one in force last
    # (four QPs on one uplink: each at half its demand).
    assert [(c["moves"], c["step_factor"], c["worst_util"]) for c in d["simulated"]] == \
        [(2, 1.0, 1.0), (1, 1.5, 1.0), (1, 1.5, 1.0), (0, 2.0, 1.0)]
    assert [m["predicted_mbps"] for m in d["moves"]] == [5.0, 5.0] and all(m["next"] == [] for m in d["moves"])
    commands = [e for e in gor.events.snapshot() if e["event"] == "command"]
    assert len(commands) == 2 and {c["loop"] for c in commands} == {d["loop"]}
    # `why FLOW` for a moved flow: this loop's detect, its decide with only that flow's
    # move, its command; a flow the loop left alone has no story.
    moved = d["moves"][0]
    story = flow_story(gor.events.snapshot(), moved["flow_id"])
    assert list(story) == [d["loop"]] and [e["event"] for e in story[d["loop"]]] == ["detect", "decide", "command"]
    why = why_line(story[d["loop"]][1])
    assert why.startswith("decide (") and "simulated 4 [2 move(s): step x1.0, worst 100%;" in why
    assert f"chose {moved['path']}" in why and "predicted 5.0 Mbit/s; next: none" in why
    stays = next(f for f in gor.flows if f.id not in {m["flow_id"] for m in d["moves"]})
    assert flow_story(gor.events.snapshot(), stays.id) == {}
    gor.mover._pool.shutdown(wait=True)
    assert len(agents.calls) == 2
    gor.events.close()


def two_flows_up_sp0(plan: AddressPlan) -> tuple[list[AgentFlow], list[FiveTuple]]:
    """b0h0 -> b1h0 and b0h1 -> b1h1, both on ports that send them up sp0: the agents'
    listing of them and their 5-tuples."""
    listing, tuples = [], []
    for k in (0, 1):
        src, dst = plan.server_at(0, k).nics[0], plan.server_at(1, k).nics[0]
        ft = FiveTuple(src.ip, dst.ip, sport=49152 + 1000 * k)
        sport = find_port(plan, ft, candidate_paths(plan, ft)[0])
        listing.append(AgentFlow(src.server, k, src.ip, dst.ip, sport, 4791, 1000, 8e6, "active"))
        tuples.append(FiveTuple(src.ip, dst.ip, sport=sport))
    return listing, tuples


def held_poll(gor: Gor) -> tuple[threading.Event, threading.Event]:
    """Make GOR's counter poll hang until released, to show what GOR does while a poll
    round is slow: the event set when a poll starts, and the one that lets it finish."""
    polled, release = threading.Event(), threading.Event()
    quiet = gor.telemetry.poll

    def slow_poll(clock, min_interval=0.0):
        polled.set()
        assert release.wait(20)
        return quiet(clock, min_interval)

    gor.telemetry.poll = slow_poll
    return polled, release


def test_a_second_tenant_on_the_chosen_path_sends_the_move_to_the_next_candidate(tmp_path):
    """The product's own loop, not a hand-built move: two flows collide on b0l0's uplink
    to sp0 (3 spines); the tick simulates its candidates and moves one flow with two
    ranked paths. It is shown on the first; then a second tenant's flow joins that path
    and its uplink raises an alarm: the move's ``retry`` takes the next candidate at
    once (not after clear_s), and the event log shows the decision, the prediction, the
    measurement and the retry."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=3)
    plan = AddressPlan(spec)
    now = [100.0]
    listing, tuples = two_flows_up_sp0(plan)
    agents = ListingAgents(listing)
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, agents, tuples)
    (decide,) = [e for e in gor.events.snapshot() if e["event"] == "decide"]
    (move,) = decide["moves"]
    first, (second,) = move["path"], move["next"]
    assert {first.split("-")[2], second.split("-")[2]} == {"sp1", "sp2"}
    # Its natural demand is its NIC's line rate (Hedera), which each spine's path gives it.
    assert len(decide["simulated"]) == 3 and move["predicted_mbps"] == 10.0
    assert [e["event"] for e in advance_moves(gor, now, 0.1)] == ["commanded", "moved"]
    (m,) = gor.mover.moves
    src, dst = plan.nic(m.flow.src), plan.nic(m.flow.dst)

    def shown_on(path: str, n: int = 1) -> None:
        ft = FiveTuple(src.ip, dst.ip, sport=m.flow.sport)
        spine = path.split("-")[2]
        gor.samples.add([Sample(now[0] - 0.01 * i, "b0l0", 1, plan.uplink_port(int(spine[2:])), 0, ft, 1000)
                         for i in range(n)])

    shown_on(first, 3)
    assert [e["event"] for e in advance_moves(gor, now, 0.1)] == ["verified"]
    # Nothing new on the new path yet: the move waits for its link to clear.
    assert advance_moves(gor, now, 0.1) == []
    joined = ("b0l0", first.split("-")[2])
    gor.alarms.raise_from_switch(joined, SwitchAlarm("b0l0", plan.uplink_port(int(joined[1][2:])), WARNING, 1,
                                                     now[0], now[0]))
    events = advance_moves(gor, now, 0.1)
    assert [e["event"] for e in events] == ["measured", "retry", "command"]
    measured, retry = events[0], events[1]
    assert measured["path"] == first and measured["predicted_mbps"] == 10.0 and measured["samples"] == 3
    assert (retry["round"], retry["path"]) == (1, second)
    assert retry["reason"] == f"{joined[0]}->{joined[1]} alarmed on the new path"
    assert [e["event"] for e in advance_moves(gor, now, 0.1)] == ["commanded", "moved"]
    shown_on(second)
    assert [e["event"] for e in advance_moves(gor, now, 0.1)] == ["verified"]
    assert predict(plan, m.flow.five_tuple)[2] == second.split("-")[2]
    gor.mover._pool.shutdown(wait=True)
    assert len(agents.calls) == 2 and agents.calls[-1][2] == m.flow.sport
    gor.events.close()


def probe_shows(gor: Gor, now: list[float], util: float, gate: threading.Event | None = None) -> list:
    """Give ``gor``'s stand-in telemetry one port counter that grows at ``util`` of
    `LINK`'s capacity as the stopped clock ``now`` moves on (``gate``: each read waits
    for it); returns the reads made, (switch, port)."""
    reads: list[tuple[str, int]] = []
    bps = util * gor.telemetry.links.capacity[LINK]

    def port_bytes(switch: str, port: int, clock) -> tuple[float, int]:
        if gate is not None:
            assert gate.wait(10)
        # Each read of the port is PROBE_GAP_S after the one before, whatever the
        # stand-in clock did meanwhile.
        t = now[0] + gor_module.PROBE_GAP_S * reads.count((switch, port))
        reads.append((switch, port))
        return t, int(t * bps / 8)

    gor.telemetry.port_bytes = port_bytes
    return reads


def probes_done(gor: Gor) -> None:
    """Wait for ``gor``'s probes to finish (their results taken in under its lock)."""
    wait_for("the probes to finish", lambda: not gor._probing, 10)
    with gor.lock:
        pass


def test_a_switchs_alarm_is_probed_at_once_and_acted_on_when_the_probe_shows_the_load(tmp_path):
    """Two flows collide on b0l0's uplink to sp0; the telemetry rounds show it at 30 %
    (the step started after the last round). A switch's notice raises the alarm: no
    round shows the load, so the link's own counter is read twice `PROBE_GAP_S` apart
    -- at once, on a probe thread, not at the next tick -- and the probe's 95 % wakes
    the loop for a reaction, which moves one flow without a telemetry poll. A second
    link's alarm arriving while that probe runs is probed at once too; an alarm on a
    link a round already showed loaded is a reaction with no probe."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=3)
    plan = AddressPlan(spec)
    listing, tuples = two_flows_up_sp0(plan)
    now = [100.0]
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, ListingAgents(listing), tuples, quiet=True,
                            clock=SteppingClock(now))
    gate = threading.Event()
    reads = probe_shows(gor, now, 0.95, gate)
    ticked = now[0]
    gor._switch_alarms.put(SwitchAlarm("b0l0", plan.uplink_port(0), NOTICE, 1, now[0], now[0]))
    assert gor._take_switch_alarms() == "" and gor._probing == {LINK}
    # The spine's downlink alarms while b0l0's probe waits for its switch: probed too.
    down = ("sp0", "b1l0")
    down_port = gor.telemetry.links.port_of(down)[1]
    gor._switch_alarms.put(SwitchAlarm("sp0", down_port, NOTICE, 1, now[0], now[0]))
    assert gor._take_switch_alarms() == "" and gor._probing == {LINK, down}
    assert gor.events.snapshot()[-1]["event"] == "alarm_raised"
    gate.set()
    gor._prober.shutdown(wait=True)
    assert sorted(reads) == [("b0l0", plan.uplink_port(0))] * 2 + [("sp0", down_port)] * 2
    probed = [e for e in gor.events.snapshot() if e["event"] == "probed"]
    assert len(probed) == 2 and gor._probed.is_set() and gor._wake.is_set()
    # The probes took 2 x PROBE_GAP_S of the clock, more than REACT_GAP_S: no wait.
    probed_at = now[0]
    assert probed_at - ticked == pytest.approx(2 * gor_module.PROBE_GAP_S)
    assert gor._between_ticks(ticked + gor.config.interval_s) == "react" and now[0] == probed_at
    polls = []
    gor.telemetry.poll = lambda clock, min_interval=0.0: polls.append(1) or {}
    gor.react()
    (d,) = [e for e in gor.events.snapshot() if e["event"] == "decide"]
    assert len(d["moves"]) == 1 and d["moves"][0]["current"].split("-")[2] == "sp0" and polls == []
    # A link a round of the window showed at act_util: its alarm is a reaction at once.
    other = ("b0l0", "sp1")
    gor._utils[other] = deque([(now[0], 0.9)])
    gor._switch_alarms.put(SwitchAlarm("b0l0", plan.uplink_port(1), NOTICE, 1, now[0], now[0]))
    assert gor._take_switch_alarms() == "react" and other not in gor._probing
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_a_switchs_warning_is_acted_on_at_once_a_notice_waits_for_the_utilisation(tmp_path):
    """Two flows collide on b0l0's uplink to sp0, but the telemetry rounds show it at
    30 % (a step that started inside the round). A switch's notice (one mark) raises
    the alarm and is not acted on: the poll must show the load. The switch's warning
    (4 marks within 8 packet times: a queue that persists) wakes the loop and is acted
    on in that tick without a round's utilisation (``act_switch_level`` warning: off
    by default, `GorConfig` says why); a warning the poll alone raised is not (marks
    of a busy link with room left), nor, with ``act_switch_level`` at critical, the
    switch's warning."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=3)
    plan = AddressPlan(spec)
    listing, tuples = two_flows_up_sp0(plan)
    port = plan.uplink_port(0)

    def alarm(gor: Gor, level: int, t: float) -> str:
        gor._switch_alarms.put(SwitchAlarm("b0l0", port, level, 4, t - 0.002, t))
        return gor._take_switch_alarms()

    for case in ("switch", "poll", "critical only"):
        now = [100.0]
        settings = {"act_switch_level": CRITICAL if case == "critical only" else WARNING}
        gor = gor_on_hot_uplink(plan, spec, tmp_path / case.replace(" ", "-"), now, ListingAgents(listing),
                                tuples, quiet=True, **settings)
        probe_shows(gor, now, 0.3)
        assert alarm(gor, NOTICE, now[0]) == ""              # raised: a probe measures its utilisation
        probes_done(gor)
        (probed,) = [e for e in gor.events.snapshot() if e["event"] == "probed"]
        assert probed["util"] == pytest.approx(0.3, abs=0.01) and not gor._probed.is_set()
        now[0] += 0.05
        gor.tick()
        assert not [e for e in gor.events.snapshot() if e["event"] == "detect"]
        now[0] += 0.05
        if case == "poll":
            gor.alarms.update(now[0], {LINK: LinkSample(0.1, 45, 500)})
            assert gor.alarms.level(LINK) == WARNING
        else:
            # Escalated, not confirmed by the switch: probed again (30 %: not loaded).
            assert alarm(gor, WARNING, now[0]) == ("react" if case == "switch" else "")
            probes_done(gor)
        gor.tick()
        decided = [e for e in gor.events.snapshot() if e["event"] == "decide"]
        if case == "switch":
            (d,) = decided
            assert len(d["moves"]) == 1 and d["moves"][0]["current"].split("-")[2] == "sp0"
        else:
            assert decided == [], case
        gor.mover._pool.shutdown(wait=True)
        gor.events.close()


class SteppingClock(StoppedClock):
    """A stopped clock that a wait with nothing to wake it moves on by its timeout."""

    def wait(self, event: threading.Event, seconds: float) -> bool:
        if event.is_set():
            return True
        self._now[0] += seconds
        return False


class GatedAgents(ListingAgents):
    """Agents whose listing answers only once ``gate`` is set (a busy agent's turn)."""

    def __init__(self, listing: list[AgentFlow]) -> None:
        super().__init__(listing)
        self.gate = threading.Event()

    def flows(self) -> tuple[set, list]:
        assert self.gate.wait(10)
        return super().flows()


class SlowAnswerAgents(ListingAgents):
    """Agents whose answer to a port change waits for ``answer`` (a reply that lags)."""

    def __init__(self, listing: list[AgentFlow]) -> None:
        super().__init__(listing)
        self.answer = threading.Event()

    def set_source_port(self, server: str, qpn: int, sport: int, timeout_s: float) -> object:
        assert self.answer.wait(10)
        return super().set_source_port(server, qpn, sport, timeout_s)


class LateAgents(GatedAgents, SlowAnswerAgents):
    """Agents whose listing waits for ``gate`` and whose answer to a port change waits
    for ``answer``."""


def test_an_alarmed_link_waiting_for_the_agents_listing_is_planned_when_it_arrives(tmp_path):
    """Two flows collide on b0l0's uplink before any agent listed them: the tick asks
    the agents (a listing on its thread) and finds nothing it may move. The listing
    comes in between ticks: the loop reacts at once -- `REACT_GAP_S` after the last
    tick, not a telemetry interval -- and that reaction moves a flow."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    now = [100.0]
    listing, tuples = two_flows_up_sp0(plan)
    agents = GatedAgents(listing)
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, agents, tuples, listed=False, clock=SteppingClock(now))
    (failed,) = [e for e in gor.events.snapshot() if e["event"] == "failed"]
    assert failed["reason"] == "no movable elephant"
    ticked = now[0]
    agents.gate.set()
    wait_for("the listing to wake the loop", gor._wake.is_set, 5)
    assert gor._between_ticks(ticked + gor.config.interval_s) == "react"
    assert now[0] - ticked == pytest.approx(gor_module.REACT_GAP_S)
    gor.react()
    decide = [e for e in gor.events.snapshot() if e["event"] == "decide"]
    assert len(decide) == 2 and len(decide[1]["moves"]) == 1, decide
    assert [e["event"] for e in gor.events.snapshot()].count("command") == 1
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_a_move_is_taken_in_while_the_loop_is_in_a_ticks_poll(tmp_path):
    """The moves in flight are watched on a thread of their own: the agent's answer and
    the sample that verifies the flow on its new path are taken in while the loop's tick
    waits for the switches' counters (a poll took 0.1-0.2 s under load: acks were
    taken in 0.13-0.3 s after the agents sent them, when the loop's thread watched)."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    clock = EmulationClock.start()
    now = [clock.now()]
    listing, tuples = two_flows_up_sp0(plan)
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, ListingAgents(listing), tuples, clock=clock)
    (m,) = gor.mover.moves
    polled, release = held_poll(gor)
    ticking = threading.Thread(target=gor.tick)
    watcher = threading.Thread(target=gor._watch)
    ticking.start()
    watcher.start()
    try:
        assert polled.wait(5)
        wait_for("the agent's answer taken in", lambda: any(e["event"] == "commanded" for e in gor.events.snapshot()), 5)
        ft = FiveTuple(m.flow.src, m.flow.dst, sport=m.sport)
        gor._incoming.put(Sample(clock.now(), "b0l0", 1, plan.uplink_port(int(m.path[2][2:])), 0, ft, 1000))
        wait_for("the move seen on its new path", lambda: any(e["event"] == "verified" for e in gor.events.snapshot()), 5)
        assert ticking.is_alive()                     # all of it while the tick still polls
    finally:
        release.set()
        gor._stop.set()
        gor._moves_changed.set()
        ticking.join(10)
        watcher.join(10)
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_the_new_port_sampled_on_the_new_path_is_the_move_before_the_agents_answer(tmp_path):
    """The data plane's evidence does not wait for the agent's answer (under load the
    answers lagged the samples by 0.2 s): a sample of the flow with its commanded port
    leaving by the new path's uplink is ``moved`` while the command is unanswered; the
    answer, when it comes, is ``commanded`` and leaves the move clearing its link. A
    sample of the flow's old port proves nothing, nor does an agents' listing asked for
    before the command undo the port."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    now = [100.0]
    listing, tuples = two_flows_up_sp0(plan)
    agents = SlowAnswerAgents(listing)
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, agents, tuples)
    (m,) = gor.mover.moves
    up = plan.uplink_port(int(m.path[2][2:]))
    old = m.flow.five_tuple
    gor.samples.add([Sample(now[0] + 0.01, "b0l0", 1, up, 0, old, 1000)])
    now[0] += 0.02
    gor.mover.advance(now[0])
    assert [e["event"] for e in gor.events.snapshot()].count("moved") == 0
    gor.samples.add([Sample(now[0] + 0.01, "b0l0", 1, up, 0, dataclasses.replace(old, sport=m.sport), 1000)])
    now[0] += 0.02
    gor.mover.advance(now[0])
    (moved,) = [e for e in gor.events.snapshot() if e["event"] == "moved"]
    assert moved["sport"] == m.sport and m.flow.sport == m.sport and m.state.value == "clearing"
    # Seen on the new path before the answer: moved and verified at once.
    assert moved["by"] == "data plane" and [e["event"] for e in gor.events.snapshot()].count("verified") == 1
    assert not any(e["event"] == "commanded" for e in gor.events.snapshot())
    # A listing the agents were asked for before the command shows the old port: GOR
    # keeps the one it gave, before the answer and after it.
    before = [dataclasses.replace(f, sport=old.sport) if f.qpn == m.flow.qpn else f for f in listing]
    gor._refresh_agent_flows(*agents.flows()[:1], before, now[0], asked=m.since - 0.01)
    assert m.flow.sport == m.sport
    agents.answer.set()
    m.future.result(5)
    events = advance_moves(gor, now, 0.02)
    assert [e["event"] for e in events] == ["commanded"] and m.state.value == "clearing"
    gor._refresh_agent_flows(*agents.flows()[:1], before, now[0], asked=m.since - 0.01)
    assert m.flow.sport == m.sport
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_a_ports_samples_are_those_of_the_whole_window_at_that_port():
    """The window's index by port (a port's elephants, a move's evidence) holds what
    the whole window holds at that port, through adds and prunes: the same elephants
    as a window of only that port's samples in the time kept, and `seen` true exactly
    when a sample of that flow left by that port since the given time."""
    import random
    rng = random.Random(5)
    ports = [("b0l0", 3), ("b0l0", 4), ("sp0", 1)]
    flows = [FiveTuple("10.0.0.1", "10.0.1.1", sport=50000 + k) for k in range(4)]
    window = SampleWindow(1.0, 16)
    kept: list[Sample] = []
    t = 0.0
    for rnd in range(30):
        batch = []
        for _ in range(rng.randrange(0, 40)):
            t += rng.random() * 0.01
            switch, port = rng.choice(ports)
            batch.append(Sample(t, switch, 1, port, 0, rng.choice(flows), rng.choice((100, 1086))))
        window.add(batch)
        kept += batch
        window.prune(t)
        kept = [s for s in kept if s.time >= t - 1.0]
        for switch, port in ports:
            alone = SampleWindow(1.0, 16)
            alone.add([s for s in kept if (s.switch, s.egress_port) == (switch, port)])
            assert window.flows(t, switch, port) == alone.flows(t)
            since = t - rng.random() * 1.2
            for f in flows:
                assert window.seen(f, switch, port, since) == any(
                    s.flow == f and (s.switch, s.egress_port) == (switch, port) and s.time >= since for s in kept)


def test_an_alarm_episode_after_a_quiet_spell_dates_the_next_loop(tmp_path):
    """A link's alarm stays up through its poll's clear_after intervals, so a link that
    congests again within them keeps the old alarm: the evidence after a quiet spell
    (`EPISODE_QUIET_S` without a switch's alarm or a poll at a threshold) starts a new
    episode, which dates the loop (``detect``'s ``t``, each move's ``latency_s``); the
    alarm's own time stays beside it (``from_alarm``, ``from_alarm_s``)."""
    from controller.alarms import EPISODE_QUIET_S
    book = AlarmBook(AlarmThresholds())
    port = 3
    book.raise_from_switch(LINK, SwitchAlarm("b0l0", port, NOTICE, 1, 10.0, 10.0))
    book.update(10.2, {LINK: LinkSample(0.03, 5, 500)})           # still marking: the same episode
    assert (book.alarms[LINK].since, book.alarms[LINK].episode) == (10.0, 10.0)
    book.update(10.45, {LINK: LinkSample(0.0, 0, 500)})           # quiet (not yet cleared) ...
    book.update(10.7, {LINK: LinkSample(0.0, 0, 500)})
    assert book.level(LINK) == NOTICE
    late = 10.2 + EPISODE_QUIET_S + 0.1                            # ... then marks again
    assert book.raise_from_switch(LINK, SwitchAlarm("b0l0", port, NOTICE, 1, late, late)) is None
    assert (book.alarms[LINK].since, book.alarms[LINK].episode) == (10.0, late)
    # In the loop: two flows on b0l0's uplink, its alarm raised a second ago and quiet
    # since; the switch's notice now, the round shows the load: the loop and its move
    # are dated now, the alarm's raise beside it.
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=3)
    plan = AddressPlan(spec)
    listing, tuples = two_flows_up_sp0(plan)
    now = [100.0]
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, ListingAgents(listing), tuples, quiet=True)
    up0 = plan.uplink_port(0)
    gor.alarms.raise_from_switch(LINK, SwitchAlarm("b0l0", up0, NOTICE, 1, now[0] - 1.0, now[0] - 1.0))
    gor.alarms.raise_from_switch(LINK, SwitchAlarm("b0l0", up0, NOTICE, 1, now[0], now[0]))
    gor._utils[LINK] = deque([(now[0], 0.95)])
    now[0] += 0.05
    gor.react()
    (detect,) = [e for e in gor.events.snapshot() if e["event"] == "detect"]
    assert (detect["t"], detect["from_alarm"]) == (100.0, 99.0)
    events = advance_moves(gor, now, 0.1)           # the agent answered at 100.05
    (moved,) = [e for e in events if e["event"] == "moved"]
    assert moved["latency_s"] == pytest.approx(0.05) and moved["from_alarm_s"] == pytest.approx(1.05)
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_a_switchs_alarm_is_acted_on_while_a_tick_waits_for_its_poll(tmp_path):
    """The reactions have a thread of their own (`Gor._react_loop`): with the ticks'
    thread held in its telemetry poll (0.1-0.4 s under load), a switch's alarm on a
    link a round showed loaded is taken in and acted on at once -- one loop, a move
    commanded -- and the poll, when it ends, finds the move already made."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    clock = EmulationClock.start()
    now = [clock.now()]
    listing, tuples = two_flows_up_sp0(plan)
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, ListingAgents(listing), tuples, quiet=True, clock=clock)
    assert not [e for e in gor.events.snapshot() if e["event"] == "detect"]
    gor._utils[LINK] = deque([(clock.now(), 0.95)])          # loaded: the alarm alone is missing
    polled, release = held_poll(gor)
    ticks = threading.Thread(target=gor._run)
    reactions = threading.Thread(target=gor._react_loop)
    ticks.start()
    reactions.start()
    try:
        assert polled.wait(5)
        gor._on_packet("b0l0", SimpleNamespace(
            metadata={"egress_port": plan.uplink_port(0), "alarm_level": NOTICE, "alarm_marks": 1,
                      "first_mark": int(clock.now() * 1e6), "sampled": 0, "ingress_port": 1}, payload=b""))
        wait_for("the reaction's move", lambda: any(e["event"] == "command" for e in gor.events.snapshot()), 5)
        assert ticks.is_alive() and not release.is_set()          # all of it while the tick still polls
        (detect,) = [e for e in gor.events.snapshot() if e["event"] == "detect"]
        assert detect["link"] == "b0l0->sp0"
    finally:
        release.set()
        gor._stop.set()
        gor._wake.set()
        gor._tick_now.set()
        ticks.join(10)
        reactions.join(10)
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_the_path_cache_answers_as_the_path_model_and_computes_each_flow_once(monkeypatch):
    """`PathCache` gives what `predict` and `candidate_paths` give, for each set of
    cables down (a failure changes the answer: part of the key), and asks the model
    once per flow and failure set; its answers are copies a caller may change."""
    from controller import paths as paths_module
    plan = AddressPlan(SPEC)
    cache = paths_module.PathCache(plan)
    flows = [FiveTuple("10.0.0.1", "10.0.1.1", sport=49152 + 7 * k) for k in range(20)]
    down = frozenset({cable("b0l0", "sp1")})
    for ft in flows:
        for d in (frozenset(), down):
            assert cache.predict(ft, d) == predict(plan, ft, d)
            assert cache.candidates(ft, d) == candidate_paths(plan, ft, d)
    assert all("sp1" not in p for ft in flows for p in cache.candidates(ft, down))
    calls = []
    monkeypatch.setattr(paths_module, "predict", lambda *a: calls.append(a) or ["x"])
    monkeypatch.setattr(paths_module, "candidate_paths", lambda *a: calls.append(a) or [["x"]])
    for ft in flows:
        cache.predict(ft, down).append("changed")
        cache.candidates(ft)[0].append("changed")
    assert calls == [] and cache.predict(flows[0], down) == predict(plan, flows[0], down)
    assert cache.candidates(FiveTuple("10.0.0.1", "10.0.1.1", sport=1)) == [["x"]] and len(calls) == 1


def test_a_probe_reads_on_while_its_link_ramps_up(tmp_path):
    """A collective step ramps up under DCQCN: a probe whose first gap shows the link
    under ``act_util`` while its alarm stays up reads on, a gap at a time, and wakes
    the loop at the first gap that shows the load (``rounds`` says how many); one whose
    link never gets there stops after `PROBE_ROUNDS` gaps, waking nothing; one whose
    alarm is gone stops after its first gap."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    listing, tuples = two_flows_up_sp0(plan)
    now = [100.0]
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, ListingAgents(listing), tuples, quiet=True)
    capacity = gor.telemetry.links.capacity[LINK]
    gor.alarms.raise_from_switch(LINK, SwitchAlarm("b0l0", plan.uplink_port(0), NOTICE, 1, now[0], now[0]))
    for ramp, woken, rounds in (([0.3, 0.6, 0.9], True, 3), ([0.5] * 9, False, gor_module.PROBE_ROUNDS)):
        gor._probed.clear()
        reads = []

        def port_bytes(switch: str, port: int, clock, ramp=ramp, reads=reads) -> tuple[float, int]:
            # Byte counts whose gap k (from read k to k + 1) runs at ramp[k].
            k = len(reads)
            reads.append(k)
            sent = sum(ramp[:k]) * capacity * gor_module.PROBE_GAP_S / 8
            return now[0] + k * gor_module.PROBE_GAP_S, int(sent)

        gor.telemetry.port_bytes = port_bytes
        gor._probe(LINK)
        probes_done(gor)
        probed = [e for e in gor.events.snapshot() if e["event"] == "probed"][-1]
        assert (probed["rounds"], gor._probed.is_set()) == (rounds, woken)
        assert probed["util"] == pytest.approx(ramp[rounds - 1], abs=0.01) and len(reads) == rounds + 1
    gor.alarms.alarms.pop(LINK)
    gor._probe(LINK)
    probes_done(gor)
    assert [e for e in gor.events.snapshot() if e["event"] == "probed"][-1]["rounds"] == 1
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_flows_cooling_down_move_again_only_when_the_model_predicts_strictly_better(tmp_path):
    """An early loop moved flows of a collision; the collision that is left involves
    only flows cooling down (`cooldown`). They may move again -- the decision's scope
    says so -- when the model predicts a strictly better placement: two such flows on
    b0l0's uplink to sp0 are split. Two that already share nothing stay where they
    are."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    for case in ("collided", "apart"):
        listing, tuples = two_flows_up_sp0(plan)
        if case == "apart":
            ft = tuples[1]
            sport = find_port(plan, ft, candidate_paths(plan, ft)[1])
            listing[1] = dataclasses.replace(listing[1], sport=sport)
            tuples[1] = dataclasses.replace(ft, sport=sport)
        now = [100.0]
        gor = gor_on_hot_uplink(plan, spec, tmp_path / case, now, ListingAgents(listing), tuples, quiet=True)
        for f in gor.flows:
            f.moved_at = now[0] - 1.0                     # moved a second ago: cooling down
        gor.alarms.raise_from_switch(LINK, SwitchAlarm("b0l0", plan.uplink_port(0), NOTICE, 1, now[0], now[0]))
        gor._utils[LINK] = deque([(now[0], 0.95)])
        now[0] += 0.02
        gor.react()
        (decide,) = [e for e in gor.events.snapshot() if e["event"] == "decide"]
        if case == "collided":
            assert decide["scope"] == "with flows cooling down" and len(decide["moves"]) == 1, decide
            assert decide["moves"][0]["path"].split("-")[2] == "sp1"
        else:
            assert decide["moves"] == [] and decide["scope"] != "with flows cooling down", decide
        gor.mover._pool.shutdown(wait=True)
        gor.events.close()


def test_a_relieved_or_quiet_alarmed_link_is_not_barred_to_the_placement(tmp_path):
    """A placement never newly puts a flow on an alarmed link -- unless that link's
    alarm has had no evidence (a switch's alarm, a poll at a threshold) for
    `EPISODE_QUIET_S`, or a move took a flow off it after its last evidence: its alarm
    only waits out ``clear_after`` quiet intervals."""
    from controller.alarms import EPISODE_QUIET_S
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    listing, tuples = two_flows_up_sp0(plan)
    now = [100.0]
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, ListingAgents(listing), tuples, quiet=True)
    other = ("b0l0", "sp1")
    gor.alarms.raise_from_switch(other, SwitchAlarm("b0l0", plan.uplink_port(1), NOTICE, 1, now[0], now[0]))
    assert gor._barred(now[0] + 0.1) == {other}
    assert gor._barred(now[0] + EPISODE_QUIET_S + 0.01) == set()            # quiet since
    (m,) = [Move(1, f, f.sport, other, tuple(candidate_paths(plan, f.five_tuple)[1]), 5e6,
                 [tuple(candidate_paths(plan, f.five_tuple)[0])], now[0]) for f in list(gor.flows)[:1]]
    m.moved_t = now[0] + 0.05                                                # moved off it after the alarm
    gor.mover.moves.append(m)
    assert gor._barred(now[0] + 0.1) == set()
    gor.alarms.raise_from_switch(other, SwitchAlarm("b0l0", plan.uplink_port(1), NOTICE, 1, now[0] + 0.2,
                                                    now[0] + 0.2))           # congested again since
    assert gor._barred(now[0] + 0.3) == {other}
    gor.events.close()


def planned_and_decided(gor) -> tuple[dict, dict]:
    """The one ``plan`` event and the ``decide`` that follows it, once both are logged
    and every move decided has gone to its agent (its answer awaited: `advance_moves`
    can take it): the planner thread does these one after the other, so a test that
    waited for the plan alone could read the events between the two, and one that
    waited for the decision could look for the moves before they were sent (CI did
    both, on a loaded host)."""
    def done() -> tuple[list, list] | None:
        events = gor.events.snapshot()
        plans = [e for e in events if e["event"] == "plan"]
        decides = [e for e in events if e["event"] == "decide"]
        if not (plans and decides):
            return None
        sent = [m for m in gor.mover.moves if m.loop == decides[0]["loop"] and m.future is not None]
        return (plans, decides) if len(sent) >= len(decides[0]["moves"]) else None

    (planned,), (decide,) = wait_for("the plan, its decision and its moves sent", done, 5)
    return planned, decide


def test_a_jobs_qps_are_planned_when_first_listed_before_any_alarm(tmp_path):
    """Two QPs of two agents, both sending up b0l0's uplink to sp0 (a collision no
    alarm of theirs has reported yet): the listing that names them first plans them -- a
    ``plan`` and a ``decide`` with scope ``plan`` moving one to sp1 -- and the move's
    ``moved`` carries ``planned_s`` (listing -> moved), not the ``latency_s`` the
    detect -> moved figures read. A later listing of the same QPs plans nothing."""
    from controller.events import move_latencies
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    listing, tuples = two_flows_up_sp0(plan)
    # The receiving end of a connection, b1h0's QP towards b0h0 (the agents list both
    # ends' QPs): it never sent a byte, and the plan does not count it as a flow.
    src, dst = plan.server_at(1, 0).nics[0], plan.server_at(0, 0).nics[0]
    ft = FiveTuple(src.ip, dst.ip, sport=50000)
    idle = AgentFlow(src.server, 9, src.ip, dst.ip, find_port(plan, ft, candidate_paths(plan, ft)[1]), 4791,
                     0, 0.0, "idle")
    now = [100.0]
    agents = LateAgents(listing + [idle])
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, agents, tuples, listed=False, quiet=True)
    assert not [e for e in gor.events.snapshot() if e["event"] in ("plan", "decide")]
    # sp1's uplink alarmed a moment ago (the job's own flows did it): no bar to a plan.
    gor.alarms.raise_from_switch(("b0l0", "sp1"), SwitchAlarm("b0l0", plan.uplink_port(1), NOTICE, 1, now[0], now[0]))
    assert gor._barred(now[0]) == {("b0l0", "sp1")}
    agents.gate.set()               # the listing arrives: merged and planned on its thread
    planned, decide = planned_and_decided(gor)
    assert (planned["new"], planned["flows"]) == (3, 2) and decide["scope"] == "plan"
    (move,) = decide["moves"]
    assert move["current"].split("-")[2] == "sp0" and move["path"].split("-")[2] == "sp1"
    now[0] += 0.1
    agents.answer.set()
    events = advance_moves(gor, now, 0.1)           # the agent answered 0.1 s after the plan
    (moved,) = [e for e in events if e["event"] == "moved"]
    assert moved["planned_s"] == pytest.approx(0.1) and "latency_s" not in moved
    assert move_latencies(gor.events.snapshot()) == []
    # `why FLOW` tells the plan's loop: plan, decide, the flow's steps.
    (story,) = flow_story(gor.events.snapshot(), move["flow_id"]).values()
    assert [e["event"] for e in story][:4] == ["plan", "decide", "command", "commanded"]
    gor._listing = None
    gor._list_agents(now[0])
    wait_for("the next listing merged", lambda: gor._listing is None, 5)
    assert len([e for e in gor.events.snapshot() if e["event"] == "plan"]) == 1
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_a_plans_move_off_an_alarmed_link_is_dated_from_its_alarm(tmp_path):
    """The agents answered their first listing late: the collision on b0l0's uplink to
    sp0 was alarmed 0.5 s before the plan. The plan's move off that link relieves the
    alarm, so it is dated from it (``latency_s``, in the detect -> moved figures), not
    from the listing."""
    from controller.events import move_latencies
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    listing, tuples = two_flows_up_sp0(plan)
    now = [100.0]
    agents = LateAgents(listing)
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, agents, tuples, listed=False, quiet=True)
    gor.alarms.raise_from_switch(LINK, SwitchAlarm("b0l0", plan.uplink_port(0), NOTICE, 1, now[0] - 0.5,
                                                   now[0] - 0.5))
    agents.gate.set()
    planned, _ = planned_and_decided(gor)
    assert planned["alarmed"] == ["b0l0->sp0"]
    now[0] += 0.1
    agents.answer.set()
    events = advance_moves(gor, now, 0.1)           # the agent answered 0.1 s after the plan
    (moved,) = [e for e in events if e["event"] == "moved"]
    assert moved["latency_s"] == pytest.approx(0.6) and "planned_s" not in moved
    assert move_latencies(gor.events.snapshot()) == [pytest.approx(0.6)]
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_an_alarm_with_an_unlisted_sender_sampled_lists_the_agents_at_once(tmp_path):
    """A switch's alarm raises b0l0's uplink while a sender no listing named yet is in
    the samples: the agents are listed at once, on the reactions' thread, not at the
    next tick (until that listing no loop has a flow it may move). An alarm that raises
    nothing asks nothing."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    listing, tuples = two_flows_up_sp0(plan)
    now = [100.0]
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, ListingAgents(listing), tuples, quiet=True)
    wait_for("the tick's listing merged", lambda: gor._listing is None, 5)
    probe_shows(gor, now, 0.3)
    now[0] += 0.1
    new = FiveTuple(plan.server_at(0, 0).nics[0].ip, plan.server_at(1, 1).nics[0].ip, sport=50001)
    gor._incoming.put(Sample(now[0], "b0l0", 1, plan.uplink_port(1), 0, new, 4000))
    gor._switch_alarms.put(SwitchAlarm("b0l0", plan.uplink_port(0), NOTICE, 1, now[0], now[0]))
    gor._take_switch_alarms()
    assert gor._agents_at == now[0]
    wait_for("the listing merged", lambda: gor._listing is None, 5)
    probes_done(gor)
    now[0] += 0.1
    gor._incoming.put(Sample(now[0], "b0l0", 1, plan.uplink_port(1), 0, dataclasses.replace(new, sport=50002), 4000))
    gor._switch_alarms.put(SwitchAlarm("b0l0", plan.uplink_port(0), NOTICE, 1, now[0], now[0]))
    asked = gor._agents_at
    gor._take_switch_alarms()                      # the level in force: raises nothing
    assert gor._agents_at == asked
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_an_agents_answer_is_dated_when_it_arrives_not_when_the_lock_is_free(tmp_path):
    """The agent answers while GOR's lock is held (a tick commanding a plan's moves held
    it up to 0.12 s in the demo): the answer is dated on the thread it arrives on, so
    ``commanded`` and ``moved`` carry its arrival time, not the time the moves were next
    taken in under the lock."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    now = [100.0]
    listing, tuples = two_flows_up_sp0(plan)
    agents = SlowAnswerAgents(listing)
    gor = gor_on_hot_uplink(plan, spec, tmp_path, now, agents, tuples)
    (m,) = gor.mover.moves
    held, release = threading.Event(), threading.Event()

    def busy_tick() -> None:
        with gor.lock:
            held.set()
            assert release.wait(10)

    ticking = threading.Thread(target=busy_tick)
    ticking.start()
    try:
        assert held.wait(5)
        now[0] = 100.05
        agents.answer.set()                            # the answer arrives at 100.05 ...
        m.future.result(5)
        now[0] = 100.25                                # ... and the lock is free at 100.25
    finally:
        release.set()
        ticking.join(10)
    gor._watch_once()
    (commanded,) = [e for e in gor.events.snapshot() if e["event"] == "commanded"]
    (moved,) = [e for e in gor.events.snapshot() if e["event"] == "moved"]
    assert commanded["t"] == moved["t"] == m.moved_t == m.flow.moved_at == 100.05
    assert moved["latency_s"] == pytest.approx(100.05 - m.detect_t)
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()


def test_a_new_senders_first_sampled_frame_lists_the_agents_and_the_listing_plans_on_arrival(tmp_path):
    """A job starting: the first sampled data frame of a flow no listing named wakes the
    reactions' thread (once per flow; an ACK-sized frame does not), which lists the
    agents then -- no tick, no alarm -- and the listing is merged and planned on the
    thread it arrives on, the moment it arrives: the plan moves one of the two QPs that
    share b0l0's uplink to sp0."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2)
    plan = AddressPlan(spec)
    now = [100.0]
    listing, tuples = two_flows_up_sp0(plan)
    agents = GatedAgents(listing)
    gor = Gor(plan, build_pipeline(spec), tmp_path, clock=SteppingClock(now), agents=agents)
    gor.telemetry = SimpleNamespace(links=LinkMap(plan))  # type: ignore[assignment]
    gor._agents_at = now[0] - 1.0                     # the last listing, before the job
    up0 = plan.uplink_port(0)

    def sampled(ft: FiveTuple, length: int) -> SimpleNamespace:
        return SimpleNamespace(metadata={"egress_port": up0, "alarm_level": 0, "alarm_marks": 0, "first_mark": 0,
                                         "sampled": 1, "ingress_port": 1},
                               payload=roce_packet(ft.src, ft.dst, ft.sport, length))

    gor._on_packet("b0l0", sampled(tuples[0], 62))          # an ACK: no sender
    assert not gor._wake.is_set()
    gor._on_packet("b0l0", sampled(tuples[0], 4154))
    assert gor._wake.is_set()
    gor._wake.clear()
    gor._on_packet("b0l0", sampled(tuples[0], 4154))        # the same flow again: asked already
    assert not gor._wake.is_set()
    gor._wake.set()
    assert gor._between_ticks(now[0] + 0.01) is None
    assert gor._listing is not None and gor._agents_at == 100.0
    now[0] = 100.1
    agents.gate.set()                                        # the listing arrives at 100.1
    planned, decide = planned_and_decided(gor)
    assert planned["t"] == 100.1 and decide["scope"] == "plan" and len(decide["moves"]) == 1
    assert gor._listing is None and len(agents.calls) == 1
    gor.mover._pool.shutdown(wait=True)
    gor.events.close()
