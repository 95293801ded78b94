"""TCCL agents on the default fabric in Mininet (root): p4sim switches, real RoCEv2.

One fabric (the default spec with its own node prefix, gRPC ports and captures on) is
brought up for the module and always torn down:

* a ring AllReduce over all 16 ranks (rail-aware order, NVLink inside servers,
  orthogonal ports) finishes with the right result on every rank;
* the RoCE frames a leaf forwarded decode in Scapy with a valid ICRC;
* with as many concurrent inter-block flows per leaf as spines, orthogonal ports put
  exactly one flow on every uplink and every spine downlink (seen in the captures);
* a SimAI MoE workload, an AICB CSV and a Chakra DDP trace written by the tests' own
  writers, imported, run for one iteration with every result checked; the bytes the
  agents count per (op, group) are the ones the imported steps call for (the file's
  sizes, scaled);
* a skewed, spread expert-parallel all-to-all with PXN relays: right bytes, none of
  them on a spine inside a block.
"""

from __future__ import annotations

import os
import random
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Iterator

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

from scapy.contrib.roce import BTH  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.utils import rdpcap  # noqa: E402

import yaml  # noqa: E402

import importer_fixtures as F  # noqa: E402
from controller.routes import program_fabric  # noqa: E402
from tccl import roce  # noqa: E402
from tccl.importers.registry import import_trace  # noqa: E402
from tccl.job import Transport, Workload, job_from_fabric  # noqa: E402
from tccl.launch import run_on_fabric  # noqa: E402
from tccl.trace import load_trace, trace_document  # noqa: E402
from tccl.traffic import expected_bytes, merged  # noqa: E402
from topo.freeports import free_port_base  # noqa: E402
from topo.net import Fabric  # noqa: E402
from topo.spec import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fabric(tmp_path_factory) -> Iterator[tuple[Fabric, Path]]:
    tmp = tmp_path_factory.mktemp("tccl-fabric")
    text = (ROOT / "topo" / "fabrics" / "default.yaml").read_text()
    spec_path = tmp / "fabric.yaml"
    spec_path.write_text(text.replace("pcap: false", "pcap: true").replace(
        "grpc_port_base: 50051", f"grpc_port_base: {free_port_base(16)}")
        + f"node_prefix: c{os.getpid() % 1000}\n")
    with Fabric(load_spec(spec_path), run_dir=tmp / "run", program=program_fabric) as fab:
        yield fab, spec_path


def roce_frames(fab: Fabric, node: str, port: int, direction: str) -> list:
    path = fab.pcap_dir / f"{node}-eth{port}_{direction}.pcap"
    if not path.exists() or path.stat().st_size <= 24:
        return []
    return [p for p in rdpcap(str(path)) if UDP in p and p[UDP].dport == 4791 and BTH in p]


def test_ring_allreduce_across_the_fabric(fabric, tmp_path):
    fab, spec_path = fabric
    job = job_from_fabric(spec_path, Workload(op="allreduce", sizes=(32 * 1024,), iters=1, warmup=1),
                          Transport(ports="orthogonal", nvlink_gbps=1.0), name="e2e-allreduce")
    results = run_on_fabric(fab, job, tmp_path, timeout=150)
    assert len(results) == len(fab.plan.servers)
    for server, res in results.items():
        assert res["rows"][0]["wrong"] == 0, server
        assert res["rows"][0]["busbw_mbps"] > 0
    # Rail order: only the two hops between blocks cross a spine.
    assert next(iter(results.values()))["ring_hops"]["spine"] == fab.spec.blocks

    # Frames a leaf delivered to a NIC: valid RoCEv2 as Scapy decodes them.
    checked = 0
    for nic in fab.plan.nics():
        for pkt in roce_frames(fab, nic.leaf, nic.leaf_port, "out"):
            raw = bytes(pkt)
            assert roce.icrc_ok(raw)
            assert pkt[BTH].icrc == int.from_bytes(raw[-4:], "big")
            assert int.from_bytes(BTH.compute_icrc(pkt[BTH], b""), "big") == pkt[BTH].icrc
            checked += 1
    assert checked > 10


@pytest.mark.parametrize("seed", [1, 2])
def test_orthogonal_ports_use_every_uplink_once(fabric, tmp_path, seed):
    fab, spec_path = fabric
    plan = fab.plan
    k = plan.spec.spines
    base = job_from_fabric(spec_path, Workload())
    rank_of = {r.ip: r.rank for r in base.ranks}
    # From every leaf of block 0 on rails 0 and 1: one flow per server to block 1
    # (servers_per_block = spines flows per leaf), each server to a different one.
    pairs = []
    for rail in (0, 1):
        src = [s.nics[rail] for s in plan.servers if s.block == 0]
        dst = [s.nics[rail] for s in plan.servers if s.block == 1]
        shift = random.Random(seed).randrange(len(dst))
        for i, nic in enumerate(src):
            pairs.append((rank_of[nic.ip], rank_of[dst[(i + shift) % len(dst)].ip]))
    assert len(pairs) == 2 * k
    job = job_from_fabric(spec_path, Workload(op="sendrecv", sizes=(48 * 1024,), iters=1, warmup=0,
                                              pairs=tuple(pairs)),
                          Transport(ports="orthogonal", seed=seed), name=f"orthogonal-{seed}")
    results = run_on_fabric(fab, job, tmp_path, timeout=120)
    assert all(res["rows"][0]["wrong"] == 0 for res in results.values())
    ports = {}
    for res in results.values():
        for f in res["flows"]:
            if (f["local_rank"], f["peer_rank"]) in pairs:
                ports[(f["src_ip"], f["dst_ip"], f["sport"])] = (f["local_rank"], f["peer_rank"])
    assert len(ports) == len(pairs)
    # Which flows each leaf sent up each uplink, and each spine sent down to each leaf.
    for rail in (0, 1):
        leaf = plan.leaf(0, rail)
        flows_per_uplink = defaultdict(set)
        for spine in range(k):
            for pkt in roce_frames(fab, leaf.name, plan.uplink_port(spine), "out"):
                key = (pkt[IP].src, pkt[IP].dst, pkt[UDP].sport)
                if key in ports:
                    flows_per_uplink[spine].add(key)
        assert sorted(len(v) for v in flows_per_uplink.values()) == [1] * k, dict(flows_per_uplink)
        dst_leaf = plan.leaf(1, rail)
        for spine in plan.spines:
            down = {(p[IP].src, p[IP].dst, p[UDP].sport)
                    for p in roce_frames(fab, spine.name, plan.spine_port(1, rail), "out")} & set(ports)
            assert len(down) == 1, (spine.name, down)


def _window(rows: list, t0: float, t1: float) -> tuple[float, int]:
    """(goodput bit/s, retransmits) of one flow's timeline between t0 and t1."""
    inside = [r for r in rows if t0 <= r[0] <= t1]
    (ta, acked_a, _, rtx_a, _), (tb, acked_b, _, rtx_b, _) = inside[0], inside[-1]
    return (acked_b - acked_a) * 8 / (tb - ta), rtx_b - rtx_a


def test_incast_two_to_one_converges_to_fair_share(fabric, tmp_path):
    """Two senders (one through a spine) into one NIC: DCQCN splits the link fairly,
    and once converged no packet is dropped (no retransmission)."""
    fab, spec_path = fabric
    plan = fab.plan
    base = job_from_fabric(spec_path, Workload())
    rank_of = {r.ip: r.rank for r in base.ranks}
    a, b = plan.server(plan.servers[0].name).nics[0], plan.servers[2].nics[0]
    dst = plan.servers[1].nics[0]
    pairs = ((rank_of[a.ip], rank_of[dst.ip]), (rank_of[b.ip], rank_of[dst.ip]))
    job = job_from_fabric(spec_path, Workload(op="sendrecv", sizes=(2_000_000,), iters=1, warmup=0,
                                              pairs=pairs), Transport(), name="incast")
    results = run_on_fabric(fab, job, tmp_path, timeout=120)
    assert all(res["rows"][0]["wrong"] == 0 for res in results.values())
    timelines = []
    for (src, _dst) in pairs:
        server = job.ranks[src].server
        flows = results[server]["timeline"]["flows"]
        timelines.append(next(rows for q, rows in flows.items() if int(q) >> 10 & 0x3FF == src))
    # Both run from the later start to the earlier end; judge the second half of that.
    start = max(t[0][0] for t in timelines)
    end = min(next(r[0] for r in t if r[1] == t[-1][1]) for t in timelines)
    assert end - start > 1.0, (start, end)
    mid = (start + end) / 2
    goodputs, retransmits = zip(*(_window(t, mid, end) for t in timelines))
    fair = sum(goodputs) / 2
    assert all(abs(g - fair) <= 0.2 * fair for g in goodputs), goodputs
    assert sum(goodputs) > 0.7 * fab.spec.links.host_mbps * 1e6, goodputs
    assert sum(retransmits) == 0, (retransmits, [results[job.ranks[s].server]["flows"] for s, _ in pairs])
    # The switch marked CE, the receiver answered with CNPs, both senders cut their rate.
    line = fab.spec.links.host_mbps * 1e6
    for t in timelines:
        assert t[-1][4] > 0                                 # CNPs received
        assert min(row[2] for row in t) < 0.75 * line       # DCQCN rate cut


def test_trace_driven_job_records_iteration_times(fabric, tmp_path):
    fab, spec_path = fabric
    trace = ROOT / "traces" / "dp_tp_pp.yaml"
    job = job_from_fabric(spec_path, Workload(trace=str(trace)),
                          Transport(ports="orthogonal", nvlink_gbps=1.0), name="trace")
    results = run_on_fabric(fab, job, tmp_path, timeout=150)
    for server, res in results.items():
        assert res["trace"] == "dp-tp-pp"
        times = res["iteration_s"]
        assert len(times) == 3, server
        assert all(t >= 0.080 for t in times)       # two 40 ms compute phases at least


def test_control_channel_moves_a_flow_to_the_predicted_spine(fabric, tmp_path):
    """GOR's move: a new source port, chosen with the hash model for the other spine,
    takes the flow there at a message boundary; nothing is lost or reordered."""
    import threading
    import time

    from tccl import ports as P
    from tccl.control import AgentClient, socket_path

    fab, spec_path = fabric
    plan = fab.plan
    base = job_from_fabric(spec_path, Workload())
    rank_of = {r.ip: r.rank for r in base.ranks}
    src, dst = plan.servers[0].nics[1], plan.servers[2].nics[1]
    pair = (rank_of[src.ip], rank_of[dst.ip])
    job = job_from_fabric(spec_path, Workload(op="sendrecv", sizes=(60_000,), iters=15, warmup=0,
                                              pairs=(pair,)), Transport(seed=5), name="move")
    outcome: dict = {}
    runner = threading.Thread(target=lambda: outcome.update(run_on_fabric(fab, job, tmp_path, timeout=120)))
    runner.start()
    try:
        path = socket_path(tmp_path, src.server)
        deadline = time.monotonic() + 60
        flow = None
        while time.monotonic() < deadline and flow is None:
            if path.exists():
                with AgentClient(path) as client:
                    try:
                        flow = next((f for f in client.list_flows()
                                     if f.dst_ip == dst.ip and f.acked_bytes > 100_000), None)
                    except Exception:       # the server may not listen yet
                        flow = None
            time.sleep(0.05)
        assert flow is not None, "the flow never showed up on the control channel"
        old_spine = P.uplink_of(plan, src.ip, dst.ip, flow.sport)
        new_spine = (old_spine + 1) % plan.spec.spines
        new_port = P.port_for_spine(plan, src.ip, dst.ip, new_spine, start=50000)
        with AgentClient(path) as client:
            reply = client.set_source_port(new_port, qpn=flow.qpn)
        assert reply.old_sport == flow.sport and reply.flow.sport == new_port
    finally:
        runner.join(150)
    results = outcome
    assert results, "the job did not finish"
    receiver = results[dst.server]
    assert receiver["rows"][0]["wrong"] == 0
    rx = next(f for f in receiver["flows"] if f["peer_rank"] == pair[0])["rx"]
    assert rx["out_of_order"] == 0 and rx["messages"] == 15
    leaf = plan.switch(src.leaf)
    seen = {spine: {p[UDP].sport for p in roce_frames(fab, leaf.name, plan.uplink_port(spine), "out")
                    if (p[IP].src, p[IP].dst) == (src.ip, dst.ip)} for spine in range(plan.spec.spines)}
    assert flow.sport in seen[old_spine] and new_port in seen[new_spine]
    assert new_port not in seen[old_spine] and flow.sport not in seen[new_spine]


def test_qps_of_one_connection_take_different_spines(fabric, tmp_path):
    """QP scaling: one connection over 2 QPs, orthogonal ports -- each QP (its own
    source port) crosses its own spine; the messages still arrive complete, in order."""
    fab, spec_path = fabric
    plan = fab.plan
    base = job_from_fabric(spec_path, Workload())
    rank_of = {r.ip: r.rank for r in base.ranks}
    src, dst = plan.servers[1].nics[2], plan.servers[3].nics[2]
    pair = (rank_of[src.ip], rank_of[dst.ip])
    job = job_from_fabric(spec_path, Workload(op="sendrecv", sizes=(40_000,), iters=6, warmup=0,
                                              pairs=(pair,)),
                          Transport(ports="orthogonal", qps=plan.spec.spines, seed=3), name="qps")
    results = run_on_fabric(fab, job, tmp_path, timeout=120)
    receiver = results[dst.server]
    assert receiver["rows"][0]["wrong"] == 0
    sent = [f for f in results[src.server]["flows"] if f["peer_rank"] == pair[1] and f["packets"]]
    assert sorted(f["qp_index"] for f in sent) == list(range(plan.spec.spines))
    sports = {f["sport"] for f in sent}
    leaf = plan.switch(src.leaf)
    spine_of = {}
    for spine in range(plan.spec.spines):
        for p in roce_frames(fab, leaf.name, plan.uplink_port(spine), "out"):
            if (p[IP].src, p[IP].dst) == (src.ip, dst.ip) and p[UDP].sport in sports:
                spine_of.setdefault(p[UDP].sport, set()).add(spine)
    assert sorted(spine_of) == sorted(sports)
    assert sorted(min(v) for v in spine_of.values()) == list(range(plan.spec.spines))
    assert all(len(v) == 1 for v in spine_of.values())


def run_trace(fab: Fabric, spec_path: Path, trace_path: Path, run_dir: Path, **transport) -> dict:
    job = job_from_fabric(spec_path, Workload(trace=str(trace_path), check=True),
                          Transport(nvlink_gbps=1.0, **transport), name=trace_path.stem)
    results = run_on_fabric(fab, job, run_dir, timeout=150)
    assert len(results) == len(fab.plan.servers)
    for server, res in results.items():
        assert res["trace_wrong"] == 0, server
    return merged(r["traffic"] for r in results.values())


@pytest.mark.parametrize("fmt,write,name", [("simai", F.simai_moe, "moe.txt"), ("aicb", F.aicb_set, "set.csv"),
                                            ("chakra", F.chakra_ddp, "ddp.0.et")])
def test_imported_workload_runs_with_the_files_bytes(fabric, tmp_path, fmt, write, name):
    fab, spec_path = fabric
    imported = import_trace(fmt, write(tmp_path / name), spec_path)
    trace_path = tmp_path / "trace.yaml"
    trace_path.write_text(yaml.safe_dump(trace_document(imported.trace)))
    traffic = run_trace(fab, spec_path, trace_path, tmp_path / "run")
    ranks = job_from_fabric(spec_path, Workload()).ranks
    assert traffic["bytes_by_step"] == expected_bytes(imported.trace.steps, ranks)
    assert set(traffic["bytes_by_step"]) == set(imported.source_bytes)
    # TP steps never leave their servers (NVLink).
    for label, chans in traffic["bytes_by_step_channel"].items():
        if label.endswith("/tp"):
            assert set(chans) == {"nvlink"}, label


def test_pxn_all_to_all_stays_on_its_rails(fabric, tmp_path):
    fab, spec_path = fabric
    path = tmp_path / "a2a.yaml"
    path.write_text(yaml.safe_dump({"name": "a2a", "iterations": 1, "ep": {"size": 2, "layout": "spread"},
                                    "steps": [{"op": "alltoall", "group": "ep", "size": 24_000,
                                               "weights": [3, 1]}]}))
    traffic = run_trace(fab, spec_path, path, tmp_path / "run", pxn=True)
    # EP pairs are the two servers of one block: PXN relays each cross-rail message
    # over NVLink and sends it on its destination's rail (one leaf), never a spine.
    chans = traffic["bytes_by_channel"]
    assert chans["spine"] == 0 and chans["leaf"] > 0 and chans["nvlink"] == chans["leaf"]
    assert load_trace(path).ep.layout == "spread"
