"""Collective algorithms and ring orders, run in one process over the NVLink channel."""

from __future__ import annotations

from pathlib import Path

import pytest

from mail_engine import MailEngine
from tccl import collectives as C
from tccl.engine import Engine
from tccl.job import Job, RankInfo, Transport, Workload, job_from_fabric
from tccl.ranks import JobError
from tccl.trace import EpShape, ep_groups
from tccl.traffic import Traffic

FABRIC = Path(__file__).resolve().parent.parent / "topo" / "fabrics" / "default.yaml"


def one_server_job(n: int) -> Job:
    """``n`` ranks on one server: every message takes the in-process NVLink channel."""
    ranks = tuple(RankInfo(rank=i, server="s", block=0, rail=i, iface=f"eth{i}", ip=f"10.{i}.0.1",
                           mac=f"02:00:00:00:00:{i:02x}", gateway_mac="02:ff:00:00:00:01")
                  for i in range(n))
    return Job(ranks=ranks, transport=Transport(nvlink_gbps=10.0, nvlink_latency_us=1.0),
               workload=Workload())


@pytest.mark.parametrize("op", ["allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce",
                                "sendrecv"])
@pytest.mark.parametrize("n,size", [(1, 100), (2, 1000), (3, 1001), (5, 4099), (4, 3), (3, 200_003)])
def test_collective_results(op, n, size):
    if op == "sendrecv" and n == 1:
        pytest.skip("sendrecv needs two ranks")
    job = one_server_job(n)
    engine = Engine(job, "s")
    ring = [(k * 2) % n for k in range(n)] if n % 2 else list(reversed(range(n)))
    assert sorted(ring) == list(range(n))
    progs, _ = C.programs_for(op, engine, ring, size, seed=7, pairs=((0, n - 1),))
    results = C.run_collective(engine, progs, timeout=10.0)
    for rank in range(n):
        assert results[rank] == C.expected(op, ring, rank, size, seed=7, pairs=((0, n - 1),)), rank
    assert engine.idle()
    engine.close()


def test_allreduce_is_xor_of_inputs():
    a, b = C.input_data(1, 0, 64), C.input_data(1, 1, 64)
    assert C.expected("allreduce", [0, 1], 0, 64, seed=1) == bytes(x ^ y for x, y in zip(a, b))
    with pytest.raises(ValueError, match="cannot reduce"):
        C.xor(b"ab", b"a")


def test_programs_reuse_a_ranks_input_and_the_check_regenerates_it():
    """Each iteration's programs send the buffer the last one sent (generated once);
    `expected` still computes from inputs of its own, holding none of them."""
    engine = Engine(one_server_job(2), "s")
    C.rank_input.cache_clear()
    _, inputs = C.programs_for("allreduce", engine, [0, 1], 5000, seed=11)
    again, inputs_again = C.programs_for("allreduce", engine, [0, 1], 5000, seed=11)
    assert all(inputs[r] is inputs_again[r] for r in (0, 1))
    assert C.rank_input.cache_info().misses == 2
    assert inputs[0] == C.input_data(11, 0, 5000)
    results = C.run_collective(engine, again, timeout=10.0)
    assert results[0] == results[1] == C.expected("allreduce", [0, 1], 0, 5000, seed=11)
    assert C.rank_input.cache_info()[:2] == (2, 2)       # (hits, misses): the check took none
    engine.close()


def test_chunks_cover_buffer():
    assert C.chunks(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert C.chunks(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]


def test_rail_order_keeps_server_hops_on_one_rail():
    job = job_from_fabric(FABRIC, Workload())
    ranks = {r.rank: r for r in job.ranks}
    ring = C.ring_order(job.ranks, "rail")
    assert sorted(ring) == sorted(ranks)
    hops = C.ring_hops(ring, ranks)
    servers = len({r.server for r in job.ranks})
    blocks = len({r.block for r in job.ranks})
    # Inside servers: rails-1 hops each; between servers: same leaf, except the hops
    # that leave a block (one per block boundary of the ring).
    assert hops["intra_server"] == servers * (job.ranks[-1].rail)
    assert hops["spine"] == blocks
    assert hops["same_leaf"] == servers - blocks
    for k, a in enumerate(ring):
        b = ring[(k + 1) % len(ring)]
        if ranks[a].server != ranks[b].server:
            assert ranks[a].rail == ranks[b].rail


def test_input_order_is_input_and_crosses_more_spines():
    job = job_from_fabric(FABRIC, Workload())
    ranks = {r.rank: r for r in job.ranks}
    rail_major = sorted(job.ranks, key=lambda r: (r.rail, r.server))
    ring = C.ring_order(rail_major, "input")
    assert ring == [r.rank for r in rail_major]
    assert C.ring_hops(ring, ranks)["spine"] > C.ring_hops(C.ring_order(job.ranks, "rail"), ranks)["spine"]
    with pytest.raises(ValueError, match="unknown ring order"):
        C.ring_order(job.ranks, "tree")


def test_ring_flows():
    assert C.ring_flows([3, 1, 2]) == [(3, 1), (1, 2), (2, 3)]
    assert C.ring_flows([5]) == []


def test_sendrecv_many_pairs_at_once():
    job = one_server_job(3)
    engine = Engine(job, "s")
    pairs = ((0, 2), (1, 2), (2, 0))
    progs, _ = C.programs_for("sendrecv", engine, [0, 1, 2], 500, seed=3, pairs=pairs)
    results = C.run_collective(engine, progs, timeout=10.0)
    assert results[2] == C.input_data(3, 0, 500) + C.input_data(3, 1, 500)
    assert results[0] == C.input_data(3, 2, 500) and results[1] == b""
    for rank in range(3):
        assert results[rank] == C.expected("sendrecv", [0, 1, 2], rank, 500, seed=3, pairs=pairs)


def test_slices_cut_large_chunks_the_same_everywhere():
    data = bytes(range(256)) * 400            # 102400 bytes -> 7 slices of <= 16 KiB
    cut = C.slices(data)
    assert len(cut) == 7 and b"".join(cut) == data
    assert max(map(len, cut)) <= C.SLICE_BYTES
    assert len(C.slices(bytes(10 * C.SLICE_BYTES * C.MAX_SLICES))) == C.MAX_SLICES
    assert C.slices(b"") == [b""]


def test_split_point_and_balancer_follow_measured_bandwidth():
    assert C.split_point(1000, 0.75) == 750
    with pytest.raises(ValueError, match="fraction"):
        C.split_point(10, 1.5)
    b = C.SplitBalancer(nvlink_bps=3e9, net_bps=1e9)
    assert b.share == pytest.approx(0.75)
    b.update(C.NET, 10**9 // 8, 1.0)          # the NICs delivered 1 Gbit/s: as configured
    b.update(C.NVLINK, 10**9 // 8, 1.0)       # NVLink only 1 Gbit/s: (3 + 1) / 2 = 2
    assert b.share == pytest.approx(2 / 3)
    b.update(C.NET, 0, 1.0)                   # a channel that carried nothing tells nothing
    assert b.share == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="must be > 0"):
        C.SplitBalancer(0, 1)


def test_split_all_reduce_needs_local_ranks():
    engine = Engine(one_server_job(2), "s")
    with pytest.raises(C.CollectiveError, match="every rank on this server"):
        C.split_all_reduce(engine, [0, 1, 7], 100, seed=1, nvlink_share=0.5)


def test_messages_round_robin_over_qps_come_back_in_order():
    """Several QPs per connection: the receiver takes messages back in send order
    although each QP delivers only its own share (here out of order across QPs)."""
    job = one_server_job(2)
    job = Job(ranks=job.ranks, transport=Transport(qps=3), workload=job.workload)
    engine = Engine(job, "s")
    for k in (2, 0, 1, 5, 3, 4):                   # message k travels on QP k % 3
        engine.deliver(1, 0, b"m%d" % k, "net", k % 3)
    got = []
    while (m := engine.take(1, 0, "net")) is not None:
        got.append(m)
    assert got == [b"m%d" % k for k in range(6)]


def fabric_job() -> Job:
    return job_from_fabric(FABRIC, Workload())


@pytest.mark.parametrize("mode", ["rail", "input"])
@pytest.mark.parametrize("size", [5, 4099, 200_003])
def test_tree_all_reduce_results(mode, size):
    """The default fabric's trees, run in one process (every edge over NVLink): every
    rank ends with the XOR of all inputs, whatever the tree's shape."""
    tree = C.tree_order(fabric_job().ranks, mode)
    n = len(tree)
    job = one_server_job(n)
    engine = Engine(job, "s")
    progs, _ = C.programs_for("allreduce", engine, list(range(n)), size, seed=5, tree=tree)
    results = C.run_collective(engine, progs, timeout=20.0)
    want = C.expected("allreduce", list(range(n)), 0, size, seed=5)
    assert all(results[r] == want for r in range(n))
    assert engine.idle()
    engine.close()


def test_tree_shapes_and_flows():
    job = fabric_job()
    for mode in ("rail", "input"):
        tree = C.tree_order(job.ranks, mode)
        assert sorted(tree) == [r.rank for r in job.ranks]
        assert sum(p is None for p in tree.values()) == 1
        for r in tree:                          # every rank reaches the root: no cycles
            seen = set()
            while tree[r] is not None:
                assert r not in seen
                seen.add(r)
                r = tree[r]
    assert C.tree_order(job.ranks[:3], "input") == {0: None, 1: 0, 2: 0}
    assert C.tree_children({0: None, 1: 0, 2: 0, 3: 1}) == {0: [1, 2], 1: [3], 2: [], 3: []}
    assert C.tree_flows({0: None, 1: 0}) == [(1, 0), (0, 1)]
    with pytest.raises(ValueError, match="unknown tree order"):
        C.tree_order(job.ranks, "ring")


def test_rail_tree_crosses_blocks_less_than_input_tree():
    job = fabric_job()
    ranks = {r.rank: r for r in job.ranks}
    blocks = len({r.block for r in job.ranks})
    aware = C.tree_hops(C.tree_order(job.ranks, "rail"), ranks)
    naive = C.tree_hops(C.tree_order(job.ranks, "input"), ranks)
    # One edge per block beyond the first crosses the spines; every other edge between
    # servers stays on its leaf (one rail, one block).
    assert aware["cross_block"] == aware["spine"] == blocks - 1
    assert naive["cross_block"] > aware["cross_block"] and naive["spine"] > aware["spine"]
    assert sum(aware.values()) - aware["cross_block"] == len(ranks) - 1
    tree = C.tree_order(job.ranks, "rail")
    for c, p in tree.items():
        if p is not None and ranks[c].server != ranks[p].server:
            assert ranks[c].rail == ranks[p].rail


def test_tree_only_for_allreduce_over_its_ranks():
    engine = Engine(one_server_job(3), "s")
    tree = {0: None, 1: 0, 2: 0}
    with pytest.raises(ValueError, match="only allreduce"):
        C.programs_for("allgather", engine, [0, 1, 2], 10, seed=1, tree=tree)
    with pytest.raises(ValueError, match="not the collective's"):
        C.programs_for("allreduce", engine, [0, 1, 2], 10, seed=1, tree={0: None, 1: 0})


@pytest.mark.parametrize("weights", [(4, 1, 1, 1), (0, 1, 0, 3), (1, 1, 1, 1)])
def test_skewed_all_to_all_delivers_each_destination_its_share(weights):
    job = one_server_job(4)
    engine = Engine(job, "s")
    size = 40_003
    progs, _ = C.programs_for("alltoall", engine, [0, 1, 2, 3], size, seed=3, weights=weights)
    results = C.run_collective(engine, progs, timeout=10.0)
    sl = C.shares(size, weights)
    for rank in range(4):
        want = C.expected("alltoall", [0, 1, 2, 3], rank, size, seed=3, weights=weights)
        assert results[rank] == want
        assert len(want) == 4 * (sl[rank][1] - sl[rank][0])
    assert sl[0][0] == 0 and sl[-1][1] == size
    engine.close()
    with pytest.raises(ValueError, match="3 weights for an all-to-all of 4"):
        C.expected("alltoall", [0, 1, 2, 3], 0, 10, seed=1, weights=(1, 1, 1))


def test_broadcast_and_reduce_are_rooted_at_the_lowest_rank():
    assert C.rooted_chain([5, 2, 9, 7]) == [2, 9, 7, 5]
    root_input = C.input_data(4, 2, 100)
    assert C.expected("broadcast", [5, 2, 9], 9, 100, seed=4) == root_input
    assert C.expected("reduce", [5, 2, 9], 5, 100, seed=4) == C.input_data(4, 5, 100)
    assert C.expected("reduce", [5, 2, 9], 2, 100, seed=4) == C.expected("allreduce", [5, 2, 9], 2, 100, seed=4)


def moe_job(nvlink: float = 1.0) -> Job:
    return job_from_fabric(FABRIC, Workload(), Transport(nvlink_gbps=nvlink))


def test_pxn_all_to_all_relays_cross_rail_messages_and_gets_the_same_bytes():
    """Spread EP groups on the default fabric: every member on another rail. With PXN
    no message crosses rails on the network (each leaves from the NIC on its
    destination's rail), and every rank still ends with what a plain all-to-all gives."""
    job = moe_job()
    groups = ep_groups(EpShape(4, "spread"), job.ranks)
    plan = C.pxn_plan(groups, job.ranks)
    info = {r.rank: r for r in job.ranks}
    assert plan.net_flows() and all(info[a].rail == info[b].rail for a, b in plan.net_flows())
    engine = MailEngine(job)
    size, weights = 30_001, (3, 1, 1, 2)
    sent: dict = {}
    progs = {r: C.pxn_all_to_all(plan, r, C.input_data(2, r, size), weights) for r in plan.ranks}
    results = C.run_collective(engine, progs, timeout=1.0, sent=sent)
    for g in groups:
        members = sorted(r.rank for r in g)
        for r in members:
            assert results[r] == C.expected("alltoall", members, r, size, seed=2, weights=weights)
    pxn = Traffic(job.ranks)
    pxn.add("alltoall", "ep", sent)
    stock_sent: dict = {}
    stock = {}
    for g in groups:
        members = sorted(r.rank for r in g)
        for r in members:
            stock[r] = C.all_to_all(members, r, C.input_data(2, r, size), weights)
    C.run_collective(MailEngine(job), stock, timeout=1.0, sent=stock_sent)
    plain = Traffic(job.ranks)
    plain.add("alltoall", "ep", stock_sent)
    # Same servers, so the same bytes leave each server; PXN keeps them off the
    # spines inside a block (only block-to-block messages still cross one).
    assert pxn.by_channel["spine"] < plain.by_channel["spine"]
    assert pxn.by_channel["nvlink"] > 0 == plain.by_channel["nvlink"]
    cross_block = sum(n for (a, b, via), n in stock_sent.items() if info[a].block != info[b].block)
    assert pxn.by_channel["spine"] == cross_block


def test_pxn_needs_nvlink():
    with pytest.raises(JobError, match="transport.pxn"):
        job_from_fabric(FABRIC, Workload(), Transport(nvlink_gbps=0, pxn=True))


def test_balancer_weighs_latency_for_small_messages():
    """Equal bandwidths, NVLink 200 ns against RoCE 4 us per ring step: a small
    AllReduce goes (almost) all to NVLink, a large one about half and half."""
    b = C.SplitBalancer(1e9, 1e9, 200e-9, 4e-6)
    assert b.share_for(1024, 4) == 1.0
    assert 0.5 < b.share_for(64 << 20, 4) < 0.51
    assert b.share_for(64 << 20, 4) == pytest.approx(b.share, abs=0.01)


def test_balancer_fits_latency_and_bandwidth_from_measurements():
    """Runs of different sizes on one channel give its latency (intercept) and
    bandwidth (slope): the model then predicts what the channel really does."""
    b = C.SplitBalancer(1e9, 1e9, 0.0, 0.0)
    steps = 6
    for nbytes in (10_000, 40_000, 90_000):           # the true NIC: 1 ms per step, 80 Mbit/s
        b.update(C.NET, nbytes, steps * 1e-3 + nbytes * 8 / 80e6, steps)
    assert b.lat[C.NET] == pytest.approx(1e-3)
    assert b.bw[C.NET] == pytest.approx(80e6)
    b.update(C.NVLINK, 50_000, 50_000 * 8 / 1e9, steps)   # one sample: bandwidth only
    assert b.lat[C.NVLINK] == 0.0 and b.bw[C.NVLINK] == pytest.approx(1e9)
