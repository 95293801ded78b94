"""Trace files: parsing, rank groups, and a trace run in one process over NVLink."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tccl import trace as T
from tccl.agent import _run_trace, workload_flows
from tccl.engine import Engine
from tccl.job import Job, Transport, Workload, job_from_fabric
from tccl.ranks import JobError, RankInfo

ROOT = Path(__file__).resolve().parent.parent
FABRIC = ROOT / "topo" / "fabrics" / "default.yaml"


@pytest.mark.parametrize("path", sorted((ROOT / "traces").glob("*.yaml")))
def test_shipped_traces_load(path):
    trace = T.load_trace(path)
    assert trace.iterations >= 1 and any(s.op for s in trace.steps)


@pytest.mark.parametrize("doc,message", [
    ({"steps": []}, "steps: a non-empty list"),
    ({"steps": [{"op": "bcast", "size": 1}]}, r"steps\[0\].op: one of"),
    ({"steps": [{"op": "allreduce", "group": "ep", "size": 1}]}, r"steps\[0\].group: one of"),
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
