"""How the flow-level model puts a step's messages on a connection's QPs
(`scale.messages`), held to the collectives' own programs. No root, no fabric."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from experiments.configs import CONFIGS, QPS, build_job
from experiments.metrics import step_costs
from mail_engine import MailEngine
from scale.fabric import FabricIndex
from scale.flows import job_step_flows
from scale.messages import messages_before, qp_messages, slice_count, step_messages, waiting_slice
from tccl import collectives as C
from tccl.job import Job, RankInfo, Transport, Workload
from tccl.trace import load_trace
from topo.addressing import AddressPlan
from topo.spec import load_spec

DEFAULT = Path(__file__).resolve().parent.parent / "topo" / "fabrics" / "default.yaml"

OPS = ["allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv"]


def two_server_job(n: int) -> Job:
    """``n`` ranks, one per server: every message goes over the network."""
    ranks = tuple(RankInfo(rank=i, server=f"s{i}", block=0, rail=0, iface="eth0", ip=f"10.0.{i}.1",
                           mac=f"02:00:00:00:00:{i:02x}", gateway_mac="02:ff:00:00:00:01")
                  for i in range(n))
    return Job(ranks=ranks, transport=Transport(), workload=Workload())


class CountingEngine(MailEngine):
    """The in-process engine, counting the messages each connection sends."""

    def __init__(self, job: Job) -> None:
        super().__init__(job)
        self.messages: Counter = Counter()

    def send(self, src, dst, data, on_done=None, via=None) -> None:
        self.messages[(src, dst)] += 1
        super().send(src, dst, data, on_done, via)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n,size", [(2, 1000), (4, 65536), (4, 65540), (3, 200_003), (4, 262144),
                                    (5, 16384 * 5), (5, 16384 * 5 + 1), (4, 1 << 22)])
def test_step_messages_are_what_the_programs_send(op: str, n: int, size: int) -> None:
    job = two_server_job(n)
    engine = CountingEngine(job)
    ring = list(range(n))
    progs, _ = C.programs_for(op, engine, ring, size, seed=3, pairs=((0, n - 1),))
    C.run_collective(engine, progs, timeout=5.0)
    # The busiest connection carries the model's count; where no part size crosses a
    # multiple of the slice, every connection does.
    counts = engine.messages.values()
    assert max(counts) == step_messages(op, n, size)
    if size not in (16384 * 5 + 1,):
        assert min(counts) == max(counts)


def test_slice_count_is_the_programs_cut() -> None:
    for nbytes in (1, 16383, 16384, 16385, 32768, 100_000, 131072, 131073, 10 ** 6):
        assert slice_count(nbytes) == len(C.slices(bytes(nbytes)))


def test_round_robin_over_a_connections_qps() -> None:
    """Message i of a step goes on QP (before + i) mod q: one message lands on one QP,
    which alternates with what the connection sent before; an even count splits evenly."""
    for qps in (1, 2, 3):
        for before in range(7):
            for messages in range(6):
                want = Counter((before + i) % qps for i in range(messages))
                got = qp_messages(messages, np.full(qps, before), np.arange(qps), qps)
                assert got.tolist() == [want[q] for q in range(qps)]
    assert qp_messages(1, np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), 2).tolist() == [1, 0, 0, 1]


def test_a_rank_waits_for_a_slice_only_with_nothing_of_its_own_to_send() -> None:
    assert waiting_slice("sendrecv", 2, 65536) == 0 == waiting_slice("alltoall", 4, 65536)
    # A ring of parts of four slices sends its own part while the first slice comes in.
    assert waiting_slice("allreduce", 4, 262144) == 0
    # Parts of one slice: the second ring step waits for it.
    assert waiting_slice("allreduce", 4, 32768) == 8192
    # A chain forwards what it receives: its first slice.
    assert waiting_slice("broadcast", 4, 65536) == 16384
    assert waiting_slice("allreduce", 1, 65536) == 0


def test_a_connections_messages_count_on_from_step_to_step(tmp_path: Path) -> None:
    """Two pipeline sends per iteration: the first always on QP 0, the second on QP 1
    (the counter runs on over the job's life); the ring's 24 slices leave it even."""
    trace_file = tmp_path / "two-sends.yaml"
    trace_file.write_text(yaml.safe_dump({"name": "two-sends", "iterations": 2, "steps": [
        {"compute_ms": 10}, {"op": "sendrecv", "group": "pp", "size": 65536},
        {"op": "sendrecv", "group": "pp", "size": 65536}, {"op": "allreduce", "group": "dp", "size": 262144}]}))
    job = build_job(DEFAULT, trace_file, CONFIGS["orthogonal"], seed=1)
    index = FabricIndex(AddressPlan(load_spec(DEFAULT)))
    trace = load_trace(trace_file)
    flows = job_step_flows(index, job, trace)
    costs = step_costs(trace, job.ranks, 10e6)
    before, per_iteration = messages_before(flows, costs, len(job.ranks), QPS)
    assert [set(b.tolist()) for b in before] == [{0}, {1}, {0}]
    assert [set(p.tolist()) for p in per_iteration] == [{2}, {2}, {24}]
    for k in range(2):
        for step, qp in ((0, 0), (1, 1)):
            carried = qp_messages(1, before[step] + k * per_iteration[step], flows[step].qp, QPS)
            assert set(flows[step].qp[carried > 0].tolist()) == {qp} and carried.sum() == len(flows[step]) // QPS
