"""Trace files: parsing, rank groups, and a trace run in one process over NVLink."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from mail_engine import MailEngine

from tccl import collectives as C
from tccl import trace as T
from tccl.agent import _run_trace, workload_flows
from tccl.engine import Engine
from tccl.job import Job, Transport, Workload, job_from_fabric
from tccl.ranks import JobError, RankInfo
from tccl.traffic import channel, expected_bytes

ROOT = Path(__file__).resolve().parent.parent
FABRIC = ROOT / "topo" / "fabrics" / "default.yaml"


@pytest.mark.parametrize("path", sorted((ROOT / "traces").glob("*.yaml")))
def test_shipped_traces_load(path):
    trace = T.load_trace(path)
    assert trace.iterations >= 1 and any(s.op for s in trace.steps)


@pytest.mark.parametrize("doc,message", [
    ({"steps": []}, "steps: a non-empty list"),
    ({"steps": [{"op": "bcast", "size": 1}]}, r"steps\[0\].op: one of"),
    ({"steps": [{"op": "allreduce", "group": "xp", "size": 1}]}, r"steps\[0\].group: one of"),
    ({"steps": [{"op": "allreduce", "size": 0}]}, r"steps\[0\].size"),
    ({"steps": [{"op": "sendrecv", "group": "dp", "size": 8}]}, "sendrecv goes with group pp"),
    ({"steps": [{"compute_ms": -1}]}, r"compute_ms: a duration"),
    ({"steps": [{"sleep": 1}]}, "unknown key"),
    ({"steps": [{"compute_ms": 1}], "iterations": 0}, "iterations: a positive integer"),
])
def test_bad_traces_name_the_step(doc, message):
    with pytest.raises(JobError, match=message):
        T.parse_trace(doc, "t.yaml")


def test_groups_and_pipeline_pairs_on_the_default_fabric():
    job = job_from_fabric(FABRIC, Workload())
    tp = T.groups("tp", job.ranks)
    dp = T.groups("dp", job.ranks)
    assert len(tp) == 4 and all(len({r.server for r in g}) == 1 and len(g) == 4 for g in tp)
    assert len(dp) == 4 and all(len({r.rail for r in g}) == 1 and len(g) == 4 for g in dp)
    pairs = T.pp_pairs(job.ranks)
    assert len(pairs) == 8
    for src, dst in pairs:
        a, b = job.ranks[src], job.ranks[dst]
        assert (a.block + 1, a.rail) == (b.block, b.rail)
        assert a.server[-1] == b.server[-1]          # same server index in its block
    trace = T.load_trace(ROOT / "traces" / "dp_tp_pp.yaml")
    flows = workload_flows(job, [], trace)
    assert set(pairs) <= set(flows) and len(flows) == len(set(flows))


def test_trace_runs_iterations_in_one_process():
    ranks = tuple(RankInfo(rank=i, server="s", block=0, rail=i, iface=f"e{i}", ip=f"10.{i}.0.1",
                           mac=f"02:00:00:00:00:{i:02x}", gateway_mac="02:ff:00:00:00:01")
                  for i in range(4))
    job = Job(ranks=ranks, transport=Transport(nvlink_gbps=1.0), workload=Workload())
    trace = T.parse_trace({"iterations": 3, "steps": [
        {"compute_ms": 20}, {"op": "allreduce", "group": "tp", "size": 40_000},
        {"op": "allgather", "group": "all", "size": 8_000}]})
    engine = Engine(job, "s")
    times = _run_trace(engine, job, trace, io.StringIO())["iteration_s"]
    assert len(times) == 3 and all(t >= 0.020 for t in times)
    assert engine.idle()


@pytest.mark.parametrize("doc,message", [
    ({"steps": [{"op": "alltoall", "group": "ep", "size": 8}]}, r"steps\[0\].group: ep needs the trace's `ep"),
    ({"ep": {"size": 1}, "steps": [{"compute_ms": 1}]}, r"ep.size: ranks per expert-parallel group, >= 2"),
    ({"ep": {"size": 2, "layout": "ring"}, "steps": [{"compute_ms": 1}]}, r"ep.layout: one of rail, spread"),
    ({"steps": [{"op": "allreduce", "ranks": [0], "size": 8}]}, r"steps\[0\].ranks: a list of >= 2"),
    ({"steps": [{"op": "allreduce", "ranks": [[0, 1], [1, 2]], "size": 8}]}, r"steps\[0\].ranks: a rank appears twice"),
    ({"steps": [{"op": "allreduce", "group": "dp", "ranks": [0, 1], "size": 8}]}, "group and ranks"),
    ({"steps": [{"op": "allreduce", "size": 8, "weights": [1, 2]}]}, r"steps\[0\].weights: only an alltoall"),
    ({"steps": [{"op": "alltoall", "size": 8, "weights": [1, -2]}]}, r"steps\[0\].weights: a share >= 0"),
    ({"steps": [{"op": "broadcast", "size": 8, "compute_ms": 1}]}, "compute_ms and op"),
])
def test_bad_extended_traces_name_the_step_and_key(doc, message):
    with pytest.raises(JobError, match=message):
        T.parse_trace(doc, "t.yaml")


def test_trace_document_round_trips():
    doc = {"name": "moe", "iterations": 2, "ep": {"size": 2, "layout": "spread"}, "steps": [
        {"compute_ms": 1.5}, {"op": "alltoall", "group": "ep", "size": 100, "weights": [3.0, 1.0]},
        {"op": "broadcast", "ranks": [[0, 4], [1, 5]], "size": 64}, {"op": "reduce", "group": "tp", "size": 8}]}
    trace = T.parse_trace(doc)
    assert T.trace_document(trace) == doc
    assert trace.steps[1].ep == T.EpShape(2, "spread") and trace.steps[2].group == T.EXPLICIT


def test_ep_groups_rail_aligned_or_spread():
    job = job_from_fabric(FABRIC, Workload())
    servers = T.servers_of(job.ranks)
    for size in (2, 4):
        rail = T.ep_groups(T.EpShape(size, "rail"), job.ranks)
        spread = T.ep_groups(T.EpShape(size, "spread"), job.ranks)
        for groups in (rail, spread):
            assert sorted(r.rank for g in groups for r in g) == list(range(16))
            assert all(len(g) == size and len({r.server for r in g}) == size for g in groups)
        assert all(len({r.rail for r in g}) == 1 for g in rail)
        assert all(len({r.rail for r in g}) == size for g in spread)
        # The same servers in each group position: only the rails differ.
        assert sorted(sorted(r.server for r in g) for g in rail) == sorted(sorted(r.server for r in g) for g in spread)
    with pytest.raises(JobError, match="ep.size: 3 must divide the job's 4 servers"):
        T.ep_groups(T.EpShape(3), job.ranks)
    assert len(servers) == 4


@pytest.mark.parametrize("doc,message", [
    ({"steps": [{"op": "allreduce", "ranks": [0, 16], "size": 8}]}, r"t.yaml: steps\[0\].ranks: rank\(s\) \[16\] not in the job"),
    ({"ep": {"size": 3}, "steps": [{"op": "alltoall", "group": "ep", "size": 8}]}, r"steps\[0\].group: ep.size: 3 must divide"),
    ({"steps": [{"op": "alltoall", "group": "tp", "size": 8, "weights": [1, 2]}]}, r"steps\[0\].weights: 2 shares for groups of \[4\] ranks"),
])
def test_traces_that_do_not_fit_the_job_are_refused_at_job_time(tmp_path, doc, message):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(JobError, match=message.replace("t.yaml", str(path))):
        job_from_fabric(FABRIC, Workload(trace=str(path)))


def test_extended_trace_runs_verified_and_counts_its_bytes():
    """ep, explicit ranks, broadcast, reduce and a skewed all-to-all in one process:
    every result checked, every byte filed under its step and channel."""
    ranks = tuple(RankInfo(rank=i, server="s", block=0, rail=i, iface=f"e{i}", ip=f"10.{i}.0.1",
                           mac=f"02:00:00:00:00:{i:02x}", gateway_mac="02:ff:00:00:00:01")
                  for i in range(4))
    job = Job(ranks=ranks, transport=Transport(nvlink_gbps=1.0), workload=Workload(check=True))
    trace = T.parse_trace({"iterations": 2, "steps": [
        {"op": "alltoall", "group": "tp", "size": 4000, "weights": [5, 1, 1, 1]},
        {"op": "broadcast", "ranks": [[0, 1], [2, 3]], "size": 3000},
        {"op": "reduce", "group": "all", "size": 2000}]})
    engine = Engine(job, "s")
    result = _run_trace(engine, job, trace, io.StringIO())
    assert result["trace_wrong"] == 0
    traffic = result["traffic"]
    # alltoall: each rank keeps its own share and sends the rest; broadcast: one
    # message down each 2-rank chain; reduce: 3 partials up a 4-rank chain.
    own = [b - a for a, b in C.shares(4000, (5, 1, 1, 1))]
    alltoall = sum(4000 - own[k] for k in range(4))
    assert traffic["bytes_by_step"] == {"alltoall/tp": 2 * alltoall, "broadcast/ranks": 2 * 2 * 3000,
                                        "reduce/all": 2 * 3 * 2000}
    assert traffic["bytes_by_channel"] == {"nvlink": sum(traffic["bytes_by_step"].values()),
                                           "leaf": 0, "spine": 0, "superspine": 0}
    engine.close()


def test_channels_of_a_message():
    def r(block, rail, server):
        return RankInfo(rank=0, server=server, block=block, rail=rail, iface="e", ip="10.0.0.1",
                        mac="02:00:00:00:00:01", gateway_mac="02:ff:00:00:00:01")
    a = r(0, 0, "b0h0")
    assert channel(a, r(0, 1, "b0h0"), "nvlink") == "nvlink"
    assert channel(a, r(0, 1, "b0h0"), "net") == "spine"          # same server, another rail: a spine
    assert channel(a, r(0, 0, "b0h1"), "net") == "leaf"
    assert channel(a, r(1, 0, "b1h0"), "net") == "spine"          # two tiers: one pod
    assert channel(a, r(1, 0, "b1h0"), "net", blocks_per_pod=1) == "superspine"
    assert channel(a, r(1, 0, "b1h0"), "net", blocks_per_pod=2) == "spine"


def test_trace_without_nvlink_runs_over_the_nics():
    """No NVLink (the fabric spec's default): every message, a server's too, takes the
    NICs -- a TP AllReduce then crosses a spine (its ranks sit on different rails)."""
    job = job_from_fabric(FABRIC, Workload(check=True), Transport(nvlink_gbps=0))
    trace = T.parse_trace({"steps": [{"compute_ms": 1}, {"op": "allreduce", "group": "tp", "size": 4000},
                                     {"op": "reduce", "group": "dp", "size": 1000}]})
    result = _run_trace(MailEngine(job), job, trace, io.StringIO())
    assert result["trace_wrong"] == 0 and "tp_nvlink_share" not in result
    chans = result["traffic"]["bytes_by_channel"]
    assert chans["nvlink"] == 0 and chans["spine"] >= 4 * 2 * 3 * 4000
    assert result["traffic"]["bytes_by_step"] == expected_bytes(trace.steps, job.ranks)
