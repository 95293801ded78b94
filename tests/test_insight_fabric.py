"""insight on a real fabric (root): a small Mininet fabric of p4sim switches with
captures on; RoCEv2 and plain UDP frames built with Scapy are sent from raw sockets
inside the hosts' namespaces; the summary of the run's captures must show every flow
with exactly the frames and bytes sent, on the path topo.hashmodel predicts.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Iterator

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

from scapy.contrib.roce import BTH  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from controller.routes import program_fabric  # noqa: E402
from insight.analyse import summarise  # noqa: E402
from insight.cli import main  # noqa: E402
from tccl.job import Transport, Workload, job_from_fabric  # noqa: E402
from tccl.launch import run_on_fabric  # noqa: E402
from topo.addressing import AddressPlan, Nic  # noqa: E402
from topo.freeports import free_port_base  # noqa: E402
from topo.hashmodel import FiveTuple, predict_path, source_port_for_spine  # noqa: E402
from topo.namespaces import host_socket  # noqa: E402
from topo.net import Fabric  # noqa: E402
from topo.spec import parse_spec, replace  # noqa: E402

FRAMES_PER_FLOW = 25
# One frame every 2 ms from each sender: far below the 10 Mbit/s links, so no queue
# drops and every frame sent is delivered.
GAP_S = 0.002


@pytest.fixture(scope="module")
def fabric(tmp_path_factory) -> Iterator[Fabric]:
    # 2 blocks x 2 servers x 1 rail, 2 spines: 4 switches, enough for same-leaf and
    # cross-spine paths on both spines.
    spec = parse_spec({"name": "inspect", "blocks": 2, "servers_per_block": 2, "rails": 1, "spines": 2,
                       "sample_rate": 0, "pcap": True})
    spec = replace(spec, node_prefix=f"i{os.getpid() % 1000}", grpc_port_base=free_port_base(spec.switches))
    with Fabric(spec, run_dir=tmp_path_factory.mktemp("run"), program=program_fabric) as fab:
        yield fab


def roce_frames(plan: AddressPlan, src: Nic, dst: Nic, sport: int, dqpn: int, payload: int) -> list[bytes]:
    head = (Ether(src=src.mac, dst=plan.switch(src.leaf).mac) / IP(src=src.ip, dst=dst.ip, tos=2, flags="DF")
            / UDP(sport=sport, dport=4791, chksum=0))
    return [bytes(head / BTH(opcode=0x04, dqpn=dqpn, psn=psn) / Raw(bytes(payload)))
            for psn in range(FRAMES_PER_FLOW)]


def udp_frames(plan: AddressPlan, src: Nic, dst: Nic, sport: int, size: int) -> list[bytes]:
    pkt = Ether(src=src.mac, dst=plan.switch(src.leaf).mac) / IP(src=src.ip, dst=dst.ip) / UDP(sport=sport, dport=7000)
    return [bytes(pkt / Raw(bytes(size - len(pkt))))] * FRAMES_PER_FLOW


def test_summary_paths_and_bytes_equal_what_was_sent(fabric: Fabric) -> None:
    plan = fabric.plan
    a, b = plan.server_at(0, 0).nics[0], plan.server_at(0, 1).nics[0]
    c, d = plan.server_at(1, 0).nics[0], plan.server_at(1, 1).nics[0]
    flows: dict[tuple, list[bytes]] = {}
    for i, (src, dst, spine) in enumerate([(a, c, 0), (a, d, 1), (b, c, 1), (d, a, 0), (c, b, 1)]):
        sport = source_port_for_spine(plan, FiveTuple(src.ip, dst.ip), spine, start=50000 + 100 * i)
        flows[(src, dst, sport, 4791)] = roce_frames(plan, src, dst, sport, 0x200000 + i, 200 + 100 * i)
    flows[(a, b, 41000, 7000)] = udp_frames(plan, a, b, 41000, 400)      # same leaf
    senders = {}
    for (src, _, _, _), frames in flows.items():
        senders.setdefault(src.ip, []).append(frames)
    socks = {ip: host_socket(fabric.host(plan.nic(ip).server).pid, plan.nic(ip).intf) for ip in senders}
    opened = {ip: s.__enter__() for ip, s in socks.items()}
    try:
        for n in range(FRAMES_PER_FLOW):
            for ip, lists in senders.items():
                for frames in lists:
                    opened[ip].send(frames[n])
            time.sleep(GAP_S)
    finally:
        for s in socks.values():
            s.__exit__(None, None, None)

    def rows() -> dict[tuple, dict]:
        s = summarise(fabric.run_dir, plan)
        return {(f["src"], f["dst"], f["sport"], f["dport"]): f for f in s["flows"]}

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        got = rows()
        if all(got.get((s.ip, d.ip, sp, dp), {}).get("delivered_packets") == FRAMES_PER_FLOW
               for s, d, sp, dp in flows):
            break
        time.sleep(0.3)
    got = rows()
    for (src, dst, sport, dport), frames in flows.items():
        row = got.get((src.ip, dst.ip, sport, dport))
        assert row is not None, f"flow {src.ip}:{sport} -> {dst.ip} not in the summary"
        sent = sum(len(f) for f in frames)
        assert (row["packets"], row["bytes"]) == (FRAMES_PER_FLOW, sent)
        assert (row["delivered_packets"], row["delivered_bytes"]) == (FRAMES_PER_FLOW, sent)
        assert row["retransmits"] == row["psn_gaps"] == 0
        assert row["path"] == predict_path(plan, FiveTuple(src.ip, dst.ip, 17, sport, dport))
        assert len(row["paths"]) == 1
        assert all(h["packets_in"] == h["packets_out"] == FRAMES_PER_FLOW for h in row["hops"])
        assert (row["proto"] == "roce") == (dport == 4791)
    assert {r["path"][2] for r in got.values() if len(r["path"]) == 5} == {s.name for s in plan.spines}
    # The uplink of block 0's leaf to spine 0 carried (at least: hosts may speak too)
    # the frames of every flow from that leaf that the hash sends to spine 0.
    link = summarise(fabric.run_dir, plan)["links"]["per_link"][f"{a.leaf}->{plan.spines[0].name}"]
    expected = [frames for (src, dst, sport, dport), frames in flows.items()
                if src.leaf == a.leaf and predict_path(plan, FiveTuple(src.ip, dst.ip, 17, sport, dport))[2:3]
                == [plan.spines[0].name]]
    assert expected
    assert link["bytes"] >= sum(len(f) for frames in expected for f in frames)
    assert link["packets"] >= FRAMES_PER_FLOW * len(expected)


def test_command_summarises_the_fabric_run(fabric: Fabric, tmp_path: Path, capsys) -> None:
    (fabric.run_dir / "fabric.yaml").write_text(
        "name: inspect\nblocks: 2\nservers_per_block: 2\nrails: 1\nspines: 2\n"
        f"node_prefix: {fabric.spec.node_prefix}\ngrpc_port_base: {fabric.spec.grpc_port_base}\n")
    assert main([str(fabric.run_dir), "--json", str(tmp_path / "s.json")]) == 0
    assert "FLOWS" in capsys.readouterr().out
    assert (tmp_path / "s.json").stat().st_size > 100


def test_agents_flows_are_found_with_their_bytes_on_predicted_paths(fabric: Fabric, tmp_path: Path) -> None:
    """A real TCCL ring AllReduce (4 ranks, random source ports): the cross-check finds
    every flow an agent reports, with the bytes it reports and the predicted path."""
    spec_path = tmp_path / "fabric.yaml"
    spec_path.write_text(
        "name: inspect\nblocks: 2\nservers_per_block: 2\nrails: 1\nspines: 2\nsample_rate: 0\n"
        f"node_prefix: {fabric.spec.node_prefix}\ngrpc_port_base: {fabric.spec.grpc_port_base}\n")
    job = job_from_fabric(spec_path, Workload(op="allreduce", sizes=(32 * 1024,), iters=1, warmup=0),
                          Transport(seed=3), name="inspect-allreduce")
    agents_dir = fabric.run_dir / "tccl"
    run_on_fabric(fabric, job, agents_dir)
    deadline = time.monotonic() + 20
    while True:
        cc = summarise(fabric.run_dir, fabric.plan)["crosscheck"]
        if cc["bytes_match"] == cc["checked"] or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert cc["checked"] >= 4          # a ring of 4 ranks: 4 sending QPs
    bad = [r for r in cc["flows"] if not (r["found"] and r["bytes_match"] and r["path_match"])]
    assert not bad, bad
