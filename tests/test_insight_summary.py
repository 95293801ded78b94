"""insight's summary of synthetic-but-real captures: pcap files written with Scapy, as
the switches of the default fabric would have written them for a handful of flows
whose every number is known by construction (drops, a go-back-N resend, CE marks at a
spine, CNPs, a source-port move, a flow on the wrong spine).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import PcapWriter

from insight.analyse import InspectError, summarise
from insight.cli import main
from insight.pcapfile import PcapError, read_records
from tccl.job import qpn
from topo.addressing import AddressPlan
from topo.hashmodel import FiveTuple, predict_path, source_port_for_spine
from topo.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_764_500_000.0
HOP_S = 0.0001
PAYLOAD = 1000
SEND_FIRST, SEND_ONLY, ACK, CNP = 0x00, 0x04, 0x11, 0x81


@pytest.fixture(scope="module")
def plan() -> AddressPlan:
    return AddressPlan(load_spec(ROOT / "topo" / "fabrics" / "default.yaml"))


class Wire:
    """Writes what every switch port of the fabric would capture for frames walked
    along a node path (ingress then egress per switch, MAC/TTL rewrites skipped: the
    summary reads IP/UDP/BTH only)."""

    def __init__(self, plan: AddressPlan) -> None:
        self.plan = plan
        self.records: dict[str, list[tuple[float, bytes]]] = defaultdict(list)
        self.g = plan.graph()

    def port(self, a: str, b: str) -> int:
        return self.g.edges[a, b]["ports"][a]

    def walk(self, frame: bytes, path: list[str], t: float, drop_after: str | None = None,
             ce_at: str | None = None) -> None:
        """Record ``frame`` along ``path`` from time ``t``; ``ce_at``: the switch whose
        egress sets CE; ``drop_after``: the switch whose egress loses the frame (it is
        captured coming in, never going out)."""
        data = bytearray(frame)
        for i in range(1, len(path) - 1):
            sw, prev, nxt = path[i], path[i - 1], path[i + 1]
            self.records[f"{sw}-eth{self.port(sw, prev)}_in.pcap"].append((t, bytes(data)))
            if sw == drop_after:
                return
            if sw == ce_at:
                data[15] |= 3       # IPv4 TOS: ECN = CE (checksum does not matter here)
            t += HOP_S
            self.records[f"{sw}-eth{self.port(sw, nxt)}_out.pcap"].append((t, bytes(data)))
            t += HOP_S

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name, recs in self.records.items():
            w = PcapWriter(str(directory / name), linktype=1, sync=True)
            for ts, data in sorted(recs, key=lambda r: r[0]):
                pkt = Ether(data)
                pkt.time = ts
                w.write(pkt)
            w.close()


def roce(src: str, dst: str, sport: int, dqpn: int, psn: int, opcode: int = SEND_FIRST,
         payload: int = PAYLOAD, ecn: int = 2) -> bytes:
    pkt = (Ether(src="02:00:00:00:00:01", dst="02:ff:00:00:00:01") / IP(src=src, dst=dst, tos=ecn)
           / UDP(sport=sport, dport=4791, chksum=0) / BTH(opcode=opcode, dqpn=dqpn, psn=psn))
    if payload:
        pkt = pkt / Raw(bytes(payload))
    return bytes(pkt)


def udp(src: str, dst: str, sport: int, dport: int, size: int) -> bytes:
    pkt = Ether() / IP(src=src, dst=dst) / UDP(sport=sport, dport=dport)
    return bytes(pkt / Raw(bytes(size - len(pkt))))


class Scenario:
    """The flows of the synthetic run and the numbers they must produce."""

    def __init__(self, plan: AddressPlan) -> None:
        self.plan = plan
        self.wire = Wire(plan)
        p = plan
        # A: rank 0 (b0h0 rail 0) -> rank 5 (b1h0 rail 0) via spine 0. PSNs 0-19; PSN 10
        # lost at the spine; go-back-N resends 10-19; the spine marks PSNs 5-9 CE; the
        # receiver sends 2 CNPs and 3 ACKs back on its own source port.
        self.a_src, self.a_dst = p.server_at(0, 0).nics[0], p.server_at(1, 0).nics[0]
        self.a_sport = source_port_for_spine(p, FiveTuple(self.a_src.ip, self.a_dst.ip), 0)
        self.a_path = predict_path(p, FiveTuple(self.a_src.ip, self.a_dst.ip, 17, self.a_sport, 4791))
        self.a_qpn = qpn(5, 0)          # the receiver's QP, carried by the data
        self.a_frames: list[bytes] = []
        t = T0
        for psn in list(range(20)) + list(range(10, 20)):
            first_time = len(self.a_frames) < 20
            frame = roce(self.a_src.ip, self.a_dst.ip, self.a_sport, self.a_qpn, psn)
            self.a_frames.append(frame)
            self.wire.walk(frame, self.a_path, t,
                           drop_after=self.a_path[2] if first_time and psn == 10 else None,
                           ce_at=self.a_path[2] if first_time and 5 <= psn <= 9 else None)
            t += 0.01
        back_sport = 50999
        back_path = predict_path(p, FiveTuple(self.a_dst.ip, self.a_src.ip, 17, back_sport, 4791))
        for i, opcode in enumerate([CNP, ACK, CNP, ACK, ACK]):
            frame = roce(self.a_dst.ip, self.a_src.ip, back_sport, qpn(0, 5), 100 + i, opcode,
                         payload=16 if opcode == CNP else 4, ecn=0)
            self.wire.walk(frame, back_path, T0 + 0.05 + 0.02 * i)
        # B: plain UDP on one leaf (b0h0 rail 1 -> b0h1 rail 1), 5 frames of 300 bytes.
        self.b_src, self.b_dst = p.server_at(0, 0).nics[1], p.server_at(0, 1).nics[1]
        self.b_path = predict_path(p, FiveTuple(self.b_src.ip, self.b_dst.ip, 17, 40000, 9999))
        for i in range(5):
            self.wire.walk(udp(self.b_src.ip, self.b_dst.ip, 40000, 9999, 300), self.b_path, T0 + 0.003 * i)
        # C: rank 2 (b0h0 rail 2) -> rank 15 (b1h1 rail 2), moved by GOR from spine 0 to
        # spine 1 after 10 packets (same QP, new source port); one CNP after the move.
        self.c_src, self.c_dst = p.server_at(0, 0).nics[2], p.server_at(1, 1).nics[2]
        flow = FiveTuple(self.c_src.ip, self.c_dst.ip)
        self.c_sports = [source_port_for_spine(p, flow, 0), source_port_for_spine(p, flow, 1)]
        self.c_qpn = qpn(15, 2)
        self.c_frames = []
        for psn in range(20):
            sport = self.c_sports[psn // 10]
            frame = roce(self.c_src.ip, self.c_dst.ip, sport, self.c_qpn, psn, payload=500)
            self.c_frames.append(frame)
            self.wire.walk(frame, predict_path(p, FiveTuple(flow.src, flow.dst, 17, sport, 4791)),
                           T0 + 0.5 + 0.01 * psn)
        cnp = roce(self.c_dst.ip, self.c_src.ip, 51000, qpn(2, 15), 7, CNP, payload=16, ecn=0)
        self.wire.walk(cnp, predict_path(p, FiveTuple(self.c_dst.ip, self.c_src.ip, 17, 51000, 4791)),
                       T0 + 0.5 + 0.15)
        # E: rank 3 (b0h0 rail 3) -> rank 7 (b1h0 rail 3) hashed to spine 0, but its
        # frames cross spine 1 (what a stale route would do): the path check must say no.
        self.e_src, self.e_dst = p.server_at(0, 0).nics[3], p.server_at(1, 0).nics[3]
        self.e_sport = source_port_for_spine(p, FiveTuple(self.e_src.ip, self.e_dst.ip), 0)
        wrong = predict_path(p, FiveTuple(self.e_src.ip, self.e_dst.ip, 17, self.e_sport, 4791))
        wrong[2] = p.spines[1].name
        self.e_wrong_path = wrong
        self.e_frames = [roce(self.e_src.ip, self.e_dst.ip, self.e_sport, qpn(7, 3), i) for i in range(4)]
        for i, frame in enumerate(self.e_frames):
            self.wire.walk(frame, wrong, T0 + 0.7 + 0.01 * i)

    def agent_results(self, directory: Path) -> None:
        """What the agents would report: exact bytes for A and C, E exact too, and a
        record for rank 0 -> rank 9 that no capture holds."""
        def rec(local: int, peer: int, src, dst, sport: int, frames: list[bytes]) -> dict:
            return {"qpn": qpn(local, peer), "local_rank": local, "peer_rank": peer, "src_ip": src.ip,
                    "dst_ip": dst.ip, "sport": sport, "dport": 4791, "packets": len(frames),
                    "bytes": sum(len(f) for f in frames)}
        p = self.plan
        flows = [rec(0, 5, self.a_src, self.a_dst, self.a_sport, self.a_frames),
                 rec(2, 15, self.c_src, self.c_dst, self.c_sports[1], self.c_frames),
                 rec(3, 7, self.e_src, self.e_dst, self.e_sport, self.e_frames),
                 {**rec(0, 9, self.a_src, p.server_at(1, 0).nics[1], 60000, self.a_frames[:3])},
                 {**rec(5, 0, self.a_dst, self.a_src, 50999, []), "packets": 0, "bytes": 0}]
        (directory / "results-b0h0.json").write_text(json.dumps({"server": "b0h0", "flows": flows}))


@pytest.fixture(scope="module")
def scenario(plan: AddressPlan, tmp_path_factory) -> tuple[Scenario, Path]:
    run = tmp_path_factory.mktemp("run")
    sc = Scenario(plan)
    sc.wire.write(run / "pcap")
    sc.agent_results(run)
    return sc, run


@pytest.fixture(scope="module")
def summary(plan: AddressPlan, scenario) -> dict:
    return summarise(scenario[1], plan)


def row(summary: dict, src: str, sport: int) -> dict:
    [found] = [f for f in summary["flows"] if f["src"] == src and f["sport"] == sport]
    return found


def test_flow_a_counts_retransmits_gap_ce_and_cnps(summary: dict, scenario) -> None:
    sc, _ = scenario
    a = row(summary, sc.a_src.ip, sc.a_sport)
    size = len(sc.a_frames[0])
    assert (a["proto"], a["dport"], a["qpn"]) == ("roce", 4791, sc.a_qpn)
    assert (a["packets"], a["bytes"]) == (30, 30 * size)
    assert (a["delivered_packets"], a["delivered_bytes"]) == (29, 29 * size)
    assert a["retransmits"] == 10
    assert (a["psn_gaps"], a["psn_missing"]) == (1, 1)
    assert a["ce_marked"] == 5 and a["ce_pct"] == pytest.approx(100 * 5 / 29, abs=1e-3)
    assert a["cnps"] == 2


def test_flow_a_path_hops_and_where_it_was_marked_and_dropped(summary: dict, scenario, plan) -> None:
    sc, _ = scenario
    a = row(summary, sc.a_src.ip, sc.a_sport)
    assert a["path"] == sc.a_path and len(a["paths"]) == 1
    leaf, spine, far = (plan.switch(n) for n in sc.a_path[1:4])
    hops = {h["switch"]: h for h in a["hops"]}
    assert [h["switch"] for h in a["hops"]] == [leaf.name, spine.name, far.name]
    assert (hops[leaf.name]["in_port"], hops[leaf.name]["out_port"]) == (sc.a_src.leaf_port, plan.uplink_port(0))
    assert (hops[spine.name]["in_port"], hops[spine.name]["out_port"]) == (
        plan.spine_port(0, 0), plan.spine_port(1, 0))
    assert (hops[far.name]["in_port"], hops[far.name]["out_port"]) == (plan.uplink_port(0), sc.a_dst.leaf_port)
    assert (hops[spine.name]["packets_in"], hops[spine.name]["packets_out"]) == (30, 29)
    assert [h["marked"] for h in a["hops"]] == [0, 5, 0]


def test_acks_and_cnps_make_no_rows_of_their_own(summary: dict, scenario) -> None:
    sc, _ = scenario
    assert not [f for f in summary["flows"] if f["src"] in (sc.a_dst.ip, sc.c_dst.ip)]
    assert summary["unattributed_cnps"] == 0


def test_plain_udp_flow_on_one_leaf(summary: dict, scenario) -> None:
    sc, _ = scenario
    b = row(summary, sc.b_src.ip, 40000)
    assert (b["proto"], b["qpn"], b["dport"]) == ("udp", None, 9999)
    assert (b["packets"], b["bytes"], b["delivered_packets"]) == (5, 1500, 5)
    assert b["path"] == sc.b_path == [sc.b_src.server, sc.b_src.leaf, sc.b_dst.server]
    assert b["retransmits"] == b["psn_gaps"] == b["cnps"] == 0


def test_moved_flow_is_two_rows_and_its_cnp_goes_to_the_new_port(summary: dict, scenario) -> None:
    sc, _ = scenario
    old, new = (row(summary, sc.c_src.ip, s) for s in sc.c_sports)
    assert old["qpn"] == new["qpn"] == sc.c_qpn
    assert old["path"][2] != new["path"][2]
    assert (old["packets"], new["packets"]) == (10, 10)
    assert (old["cnps"], new["cnps"]) == (0, 1)
    assert old["retransmits"] == new["retransmits"] == new["psn_gaps"] == 0


def test_link_load_per_bin_adds_up(summary: dict, scenario, plan) -> None:
    sc, _ = scenario
    links = summary["links"]["per_link"]
    up = links[f"{sc.a_path[1]}->{sc.a_path[2]}"]
    # Only A leaves rail 0's leaf of block 0 (C and E are on rails 2 and 3).
    assert up["bytes"] == sum(len(f) for f in sc.a_frames)
    assert sum(up["bytes_per_bin"]) == up["bytes"]
    # A's 30 frames, one every 10 ms: 10 per 0.1 s bin, in the first three bins.
    size = len(sc.a_frames[0])
    assert up["bytes_per_bin"][:3] == [10 * size, 10 * size, 10 * size]
    rate = plan.spec.links.uplink_mbps * 1e6
    assert up["max_util"] == pytest.approx(10 * size * 8 / 0.1 / rate, abs=1e-4)
    into_spine = links[f"{sc.a_path[2]}->{sc.a_path[3]}"]
    assert into_spine["ce_marked"] == 5
    host_link = links[f"{sc.b_src.server}->{sc.b_src.leaf}"]
    assert host_link["bytes"] == 1500 and host_link["packets"] == 5
    assert not links[f"{plan.spines[1].name}->{plan.leaves[0].name}"]["packets"]


def test_crosscheck_finds_flows_and_judges_bytes_and_paths(summary: dict) -> None:
    cc = summary["crosscheck"]
    by_dst = {(r["src"], r["dst"]): r for r in cc["flows"]}
    assert cc["checked"] == 4           # the responder-only record is skipped
    assert (cc["found"], cc["bytes_match"], cc["path_match"]) == (3, 3, 2)
    a = by_dst[("10.0.0.1", "10.0.1.1")]
    assert a["bytes_match"] and a["path_match"] and a["diff_pct"] == 0
    c = by_dst[("10.2.0.1", "10.2.1.2")]
    assert len(c["segments"]) == 2 and c["path_match"] and c["bytes_match"]
    e = by_dst[("10.3.0.1", "10.3.1.1")]
    assert e["bytes_match"] and not e["path_match"]
    assert e["segments"][0]["path"][2] != e["segments"][0]["predicted"][2]
    missing = by_dst[("10.0.0.1", "10.1.1.1")]
    assert not missing["found"] and not missing["bytes_match"]


def test_bytes_off_by_more_than_one_percent_do_not_match(plan, scenario, tmp_path) -> None:
    sc, run = scenario
    a_bytes = sum(len(f) for f in sc.a_frames)
    rec = {"local_rank": 0, "peer_rank": 5, "src_ip": sc.a_src.ip, "dst_ip": sc.a_dst.ip,
           "packets": 30, "bytes": round(a_bytes * 1.02)}
    path = tmp_path / "results-x.json"
    path.write_text(json.dumps({"server": "x", "flows": [rec]}))
    [r] = summarise(run, plan, agent_files=[path])["crosscheck"]["flows"]
    assert r["found"] and not r["bytes_match"] and r["diff_pct"] == pytest.approx(-100 * 0.02 / 1.02, abs=0.01)


def test_gor_events_are_put_on_the_capture_clock(plan, scenario, tmp_path) -> None:
    _, run = scenario
    (run / "gor-events.jsonl").write_text(json.dumps({"ts": T0 + 0.6, "t": 5.0, "event": "moved", "loop": 1}) + "\n")
    try:
        events = summarise(run, plan)["events"]
    finally:
        (run / "gor-events.jsonl").unlink()
    assert [(e["event"], e["t_rel"]) for e in events] == [("moved", pytest.approx(0.6, abs=1e-6))]


def test_cli_prints_tables_and_writes_json(scenario, capsys, tmp_path) -> None:
    sc, run = scenario
    out = tmp_path / "s.json"
    assert main([str(run), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "FLOWS" in text and "CROSS-CHECK" in text and f"{sc.a_src.ip}:{sc.a_sport}" in text
    doc = json.loads(out.read_text())
    assert len(doc["flows"]) == 5 and doc["crosscheck"]["checked"] == 4


def test_truncated_capture_is_read_up_to_its_last_whole_record(tmp_path) -> None:
    path = tmp_path / "x.pcap"
    w = PcapWriter(str(path), linktype=1, sync=True)
    for i in range(3):
        pkt = Ether(udp("10.0.0.1", "10.0.1.1", 1000 + i, 9, 100))
        pkt.time = T0 + i
        w.write(pkt)
    w.close()
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    records = list(read_records(path))
    assert [ts for ts, _ in records] == [T0, T0 + 1]
    path.write_bytes(b"not a pcap file at all....")
    with pytest.raises(PcapError, match="not a pcap file"):
        list(read_records(path))


def test_a_directory_without_captures_is_a_clear_error(plan, tmp_path) -> None:
    with pytest.raises(InspectError, match="no port captures"):
        summarise(tmp_path, plan)
    assert main([str(tmp_path / "nope")]) == 2


def test_cnps_of_an_address_pair_with_two_connections_go_by_tccl_qp_numbers() -> None:
    from insight.flows import FlowTable
    from topo.frames import decode
    table = FlowTable(T0, 0.1)
    for i, dqpn in enumerate((qpn(5, 0), qpn(7, 3))):
        table.add(0, True, True, T0 + i, decode(roce("10.0.0.1", "10.0.1.1", 50000 + i, dqpn, 0)))
    for cnp_qpn in (qpn(3, 7), qpn(3, 7), 0x42):
        table.add(1, True, False, T0 + 2, decode(roce("10.0.1.1", "10.0.0.1", 51000, cnp_qpn, 0, CNP, 16, 0)))
    table.attribute_cnps()
    cnps = {r.key[5]: r.cnps for r in table.rows.values()}
    assert cnps == {qpn(5, 0): 0, qpn(7, 3): 2}
    assert table.unattributed_cnps == 1


def test_json_to_stdout_keeps_the_tables_on_stderr(scenario, capsys) -> None:
    _, run = scenario
    assert main([str(run), "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["fabric"] == "default"
    assert "FLOWS" in captured.err
