"""astral.p4 on the engine, programmed by controller.routes (no root): ECN marking
follows the RED profile, the switch's ECN alarms (sliding windows of marks per port,
one alarm per port and level per hold-off), sampled RoCE packets reach the CPU port
with their metadata, CNPs get the high priority, and pipeline builds are cached per
hash algorithm."""

from __future__ import annotations

import asyncio
import dataclasses

import finsy as fy
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.alarms import SwitchAlarms, parse_alarm
from controller.config import default_switch_alarms
from controller.routes import entities, switch_program, write_batched
from fabric_sim import compiled, install
from p4sim.runtime.service import MAX_BATCH_UPDATES
from p4sim.switch.v1model import V1Switch, run_to_completion
from topo.addressing import CPU_PORT, AddressPlan
from topo.hashmodel import FiveTuple, predict_path
from topo.headers import CNP_DSCP, PACKET_IN, ROCE_PRIORITY, dscp_priority, priority_dscp
from topo.pipeline import build_pipeline
from topo.spec import EcnProfile, FabricSpec

SPEC = FabricSpec(blocks=2, servers_per_block=2, rails=2, spines=2, sample_rate=3,
                  ecn=EcnProfile(kmin=4, kmax=12, pmax=0.5))


def leaf_engine(plan: AddressPlan, name: str, alarms: SwitchAlarms | None = None, clock=None) -> V1Switch:
    sw = V1Switch(compiled(plan.spec.ecmp_hash), cpu_port=CPU_PORT, clock=clock)
    install(sw, dataclasses.replace(switch_program(plan, name), alarms=alarms))
    return sw


def roce(plan: AddressPlan, src, dst, sport: int, opcode: int = 4, tos: int = 2) -> bytes:
    return bytes(Ether(src=src.mac, dst=plan.switch(src.leaf).mac) / IP(src=src.ip, dst=dst.ip, tos=tos)
                 / UDP(sport=sport, dport=4791) / BTH(opcode=opcode, dqpn=5, psn=sport) / Raw(b"d" * 64))


def test_ecn_marks_follow_kmin_kmax_pmax():
    plan = AddressPlan(SPEC)
    sw = leaf_engine(plan, "b0l0")
    src, dst = plan.server_at(0, 0).nics[0], plan.server_at(1, 0).nics[0]
    data = roce(plan, src, dst, 1000)

    def marked_fraction(qdepth: int, n: int) -> float:
        marked = 0
        for _ in range(n):
            (job,) = sw.run_ingress(src.leaf_port, data)
            sent, _samples = sw.run_egress(job, qdepth, qdepth, 0, 0)  # samples: jobs to the CPU
            (_port, out), = [o for o in sent if o[0] != CPU_PORT]
            marked += Ether(out)[IP].tos & 3 == 3
        return marked / n

    assert marked_fraction(0, 200) == 0
    assert marked_fraction(SPEC.ecn.kmin, 200) == 0
    assert marked_fraction(SPEC.ecn.kmax, 100) == 1
    assert marked_fraction(500, 100) == 1
    midway = (SPEC.ecn.kmin + SPEC.ecn.kmax) // 2     # probability pmax / 2 = 0.25
    assert 0.18 < marked_fraction(midway, 2000) < 0.32
    # Not-ECT packets are never marked
    (job,) = sw.run_ingress(src.leaf_port, roce(plan, src, dst, 1000, tos=0))
    sent, _samples = sw.run_egress(job, 500, 500, 0, 0)
    outs = [o for o in sent if o[0] != CPU_PORT]
    assert Ether(outs[0][1])[IP].tos & 3 == 0


def test_ecn_alarms_count_marks_in_sliding_windows_once_per_holdoff():
    """Levels 2, 4, 8 marks within 4, 8, 8 ms: each reached level is one PacketIn naming
    the level, its marks and the first mark's time (the switch's emulated us); a level
    already sent waits for the hold-off, a higher one does not; marks spread wider
    than a window raise nothing; each port counts its own marks; no config, no alarm."""
    plan = AddressPlan(SPEC)
    now = [0]
    alarms = SwitchAlarms((2, 4, 8), (0.004, 0.008, 0.008), 0.1)
    sw = leaf_engine(plan, "b0l0", alarms, clock=lambda: now[0])
    src = plan.server_at(0, 0).nics[0]
    dst = plan.server_at(1, 0).nics[0]
    # Two flows leaving by the two uplinks (the hash model's ports), to check per-port counts
    ports = {}
    for sport in range(50000, 50100):
        spine = predict_path(plan, FiveTuple(src.ip, dst.ip, 17, sport, 4791))[2]
        ports.setdefault(plan.uplink_port(int(spine.removeprefix("sp"))), sport)
    (up0, sport0), (up1, sport1) = sorted(ports.items())

    def send(at_ms: float, sport: int = sport0, qdepth: int = SPEC.ecn.kmax) -> list[tuple]:
        """One packet at ``at_ms`` through a queue ``qdepth`` deep: the alarms it raised
        as (port, level, marks, first mark ms)."""
        now[0] = round(at_ms * 1000)
        (job,) = sw.run_ingress(src.leaf_port, roce(plan, src, dst, sport))
        sent, clones = sw.run_egress(job, qdepth, qdepth, now[0], 0)
        out = []
        for clone in clones:
            for port, data in sw.run_egress(clone, 0, 0, now[0], 0)[0]:
                assert port == CPU_PORT
                fields = dict(zip([f for f, _ in PACKET_IN.fields], PACKET_IN.struct().unpack_from(data)))
                fields["first_mark"] = int.from_bytes(fields["first_mark"], "big")
                alarm = parse_alarm(now[0] / 1e6, "b0l0", fields)
                if alarm is not None:
                    out.append((alarm.port, alarm.level, alarm.marks, round(alarm.first_mark * 1e3, 3)))
        return out

    assert send(10) == []                                   # one mark: under every level
    assert send(11) == [(up0, 1, 2, 10.0)]                  # two within 4 ms: notice
    assert send(12) == []                                   # still notice: held off
    assert send(13) == [(up0, 2, 4, 10.0)]                  # four within 8 ms: warning
    assert [send(t) for t in (14, 15, 16)] == [[], [], []]
    assert send(17) == [(up0, 3, 8, 10.0)]                  # eight within 8 ms: critical
    assert send(18) == []                                   # critical held off
    assert send(12.5, sport1) == []                          # the other uplink counts its own
    assert send(14, sport1) == [(up1, 1, 2, 12.5)]
    assert send(20, qdepth=0) == []                         # unmarked packets count nothing
    # Marks 5 ms apart never make two within 4 ms, even after the hold-off
    assert [send(t) for t in range(200, 240, 5)] == [[]] * 8
    # After the hold-off the same level is sent again, its window the latest marks
    assert send(238) == [(up0, 1, 2, 235.0)]
    # Without an alarm config (a fabric programmed without GOR) nothing is raised
    sw = leaf_engine(plan, "b0l0", None, clock=lambda: now[0])
    assert [send(t) for t in range(300, 340)] == [[]] * 40


def test_one_in_n_roce_data_packets_are_sampled_to_the_cpu_with_metadata():
    plan = AddressPlan(SPEC)
    leaf = plan.switch("b0l1")
    sw = leaf_engine(plan, leaf.name)
    src, dst = plan.server_at(0, 1).nics[1], plan.server_at(1, 1).nics[1]
    sent = 3000
    pins = []
    for k in range(sent):
        sport = 40000 + k % 64
        outs = run_to_completion(sw, src.leaf_port, roce(plan, src, dst, sport))
        for port, data in outs:
            if port == CPU_PORT:
                ingress, egress, qdepth, switch_id, sampled, level, _marks, _first = \
                    PACKET_IN.struct().unpack_from(data)
                assert (sampled, level) == (1, 0)       # a sample, no alarm (no mark)
                pins.append((sport, ingress, egress, qdepth, switch_id, Ether(data[PACKET_IN.length:])))
    # The skip between samples is random with mean N: 1000 expected, standard
    # deviation about sqrt(sent / 3N) = 18.
    assert abs(len(pins) - sent / SPEC.sample_rate) < 0.1 * sent / SPEC.sample_rate, len(pins)
    for sport, ingress, egress, qdepth, switch_id, pkt in pins:
        spine = predict_path(plan, FiveTuple(src.ip, dst.ip, 17, sport, 4791))[2]
        assert (ingress, switch_id, qdepth) == (src.leaf_port, leaf.switch_id, 0)
        assert egress == plan.uplink_port(int(spine.removeprefix("sp")))
        assert pkt[IP].src == src.ip and pkt[BTH].psn == sport
    # Nor is what a leaf delivers to a NIC (only fabric links are sampled)
    local = plan.server_at(0, 0).nics[1]
    for sport in range(40000, 40012):
        outs = run_to_completion(sw, src.leaf_port, roce(plan, src, local, sport))
        assert [port for port, _ in outs] == [local.leaf_port]
    # CNPs and non-RoCE UDP are not sampled
    for sport in range(12):
        outs = run_to_completion(sw, src.leaf_port, roce(plan, src, dst, sport, opcode=0x81))
        assert all(port != CPU_PORT for port, _ in outs)


def test_sampling_does_not_alias_with_flows_that_take_turns():
    """Flows whose packets alternate on a leaf are all sampled, in proportion: a fixed
    1-in-N countdown with N a multiple of the number of flows picks the same flow every
    time (what made GOR miss a moved flow on its new uplink)."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=2, spines=2, sample_rate=4)
    plan = AddressPlan(spec)
    sw = leaf_engine(plan, "b0l0")
    senders = [plan.server_at(0, 0).nics[0], plan.server_at(0, 1).nics[0]]
    dst = plan.server_at(1, 0).nics[0]
    frames = [roce(plan, src, dst, 50000 + k) for k, src in enumerate(senders)]
    per_flow = {src.ip: 0 for src in senders}
    for k in range(2000):
        src = senders[k % 2]
        for port, data in run_to_completion(sw, src.leaf_port, frames[k % 2]):
            if port == CPU_PORT:
                per_flow[Ether(data[PACKET_IN.length:])[IP].src] += 1
    # 250 samples expected per flow (1000 packets each at 1 in 4)
    assert all(200 < n < 300 for n in per_flow.values()), per_flow


def test_priority_is_the_dscp_class_selector():
    """RoCE data (DSCP 26) on the lossless priority 3, CNPs (DSCP 48) above it on 6,
    unmarked traffic on 0 -- whatever the BTH opcode says."""
    plan = AddressPlan(SPEC)
    sw = leaf_engine(plan, "b0l0")
    src, dst = plan.server_at(0, 0).nics[0], plan.server_at(1, 0).nics[0]
    (cnp,) = sw.run_ingress(src.leaf_port, roce(plan, src, dst, 7, opcode=0x81, tos=CNP_DSCP << 2))
    (data,) = sw.run_ingress(src.leaf_port, roce(plan, src, dst, 7, opcode=4, tos=priority_dscp(3) << 2 | 2))
    (plain,) = sw.run_ingress(src.leaf_port, roce(plan, src, dst, 7, opcode=0x81))
    assert (cnp.priority, data.priority, plain.priority) == (dscp_priority(CNP_DSCP), ROCE_PRIORITY, 0) == (6, 3, 0)


def test_pipeline_build_is_reused_and_per_hash_algorithm(tmp_path):
    first = build_pipeline(SPEC, tmp_path)
    stamp = first.device_config.stat().st_mtime_ns
    again = build_pipeline(SPEC, tmp_path)
    assert again == first and again.device_config.stat().st_mtime_ns == stamp
    assert "AstralIngress.ipv4_lpm" in first.p4info.read_text()
    crc16 = build_pipeline(FabricSpec(blocks=1, servers_per_block=1, rails=1, spines=1, ecmp_hash="crc16"), tmp_path)
    assert crc16.device_config != first.device_config
    assert '"crc16"' in crc16.device_config.read_text()


def test_every_switch_program_encodes_against_the_compiled_p4info(tmp_path):
    """Names, match kinds and widths of the P4Runtime writes fit the program (no switch
    needed: finsy encodes against the P4Info)."""
    plan = AddressPlan(SPEC)
    schema = fy.P4Schema(build_pipeline(SPEC, tmp_path).p4info)
    for sw in plan.switches:
        program = dataclasses.replace(switch_program(plan, sw.name), alarms=default_switch_alarms(plan, 0.25))
        encoded = [e.encode(schema) for e in entities(program)]
        tables = {m.table_entry.table_id for m in encoded if m.HasField("table_entry")}
        expected = {"switch_config", "ipv4_lpm", "ecn_threshold", "sampled_port", "alarm_config"}
        if sw.role == "leaf":
            expected |= {"ecmp_nhop", "arp_reply"}
        assert tables == {schema.tables[name].id for name in expected}
        assert sum(m.HasField("packet_replication_engine_entry") for m in encoded) == 1


def test_switch_programs_larger_than_a_batch_are_written_whole_in_order():
    """A p4sim switch reports one error per update for batches of up to
    MAX_BATCH_UPDATES updates (a larger failing one is rolled back whole);
    controller.routes splits a longer program into such batches, in order."""
    class Recorder:
        def __init__(self) -> None:
            self.batches: list[list] = []

        async def write(self, updates: list) -> None:
            self.batches.append(list(updates))

    updates = list(range(2 * MAX_BATCH_UPDATES + 3))
    switch = Recorder()
    asyncio.run(write_batched(switch, updates))
    assert [len(b) for b in switch.batches] == [MAX_BATCH_UPDATES, MAX_BATCH_UPDATES, 3]
    assert [u for b in switch.batches for u in b] == updates
