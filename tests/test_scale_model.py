"""The flow-level model (scale/): progressive filling on hand-checkable cases, its paths
against the hash model's, flow-count invariants, GOR's placement, the CLI and its
errors. No root, no fabric."""

from __future__ import annotations

import dataclasses
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from controller.paths import candidate_paths
from experiments.configs import CONFIGS, QPS, build_job
from experiments.metrics import StepCost
from scale.fabric import NONE, FabricIndex
from controller.fairness import max_min_rates
from scale.flows import job_step_flows, step_flows
from scale.gor import replan
from scale.model import evaluate, evaluate_job, excess, step_seconds
from tccl.trace import load_trace
from topo.addressing import AddressPlan
from topo.hashmodel import PORT_RANGE, FiveTuple, predict_path
from topo.spec import FabricSpec, load_spec

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "topo" / "fabrics" / "default.yaml"
LARGE = ROOT / "topo" / "fabrics" / "large.yaml"
TRACE = ROOT / "traces" / "dp_tp_pp.yaml"


def job_for(config: str, spec: Path = DEFAULT, trace: Path = TRACE):
    return build_job(spec, trace, CONFIGS[config], seed=1)


# --- progressive filling ------------------------------------------------------------------

def test_flows_on_one_link_share_it_equally() -> None:
    alloc = max_min_rates(np.array([[0], [0], [0], [0]]), {0: 12.0})
    assert alloc.rates.tolist() == pytest.approx([3.0] * 4)
    assert alloc.flows_per_link.tolist() == [4] and alloc.load_bps.tolist() == pytest.approx([12.0])


def test_a_flow_held_elsewhere_leaves_its_share_to_the_others() -> None:
    # Link 0 (10) carries flows a, b, c; c also crosses link 1 (2): c gets 2, a and b 4 each.
    alloc = max_min_rates(np.array([[0, NONE], [0, NONE], [0, 1]]), {0: 10.0, 1: 2.0})
    assert alloc.rates.tolist() == pytest.approx([4.0, 4.0, 2.0])
    assert alloc.load_bps.tolist() == pytest.approx([10.0, 2.0])


def test_the_parking_lot() -> None:
    # Links 0 and 1 (1 each); flow 0 crosses both, flows 1 and 2 one each: all get 1/2.
    alloc = max_min_rates(np.array([[0, 1], [0, NONE], [1, NONE]]), {0: 1.0, 1: 1.0})
    assert alloc.rates.tolist() == pytest.approx([0.5, 0.5, 0.5])
    # Give link 1 capacity 3: flow 0 is held at 1/2 by link 0, flow 2 takes the rest (2.5).
    alloc = max_min_rates(np.array([[0, 1], [0, NONE], [1, NONE]]), {0: 1.0, 1: 3.0})
    assert alloc.rates.tolist() == pytest.approx([0.5, 0.5, 2.5])


def test_a_ring_moves_at_its_slowest_hop() -> None:
    # Flows 0 and 1 are one ring's hops; hop 0 shares link 0 (1) with flow 2, hop 1 has
    # link 1 (10) to itself -- yet moves at hop 0's pace, leaving link 1 mostly idle.
    links = np.array([[0], [1], [0]])
    coupled = max_min_rates(links, {0: 1.0, 1: 10.0}, units=np.array([7, 7, 3]))
    assert coupled.rates.tolist() == pytest.approx([0.5, 0.5, 0.5])
    assert coupled.load_bps.tolist() == pytest.approx([1.0, 0.5])
    assert max_min_rates(links, {0: 1.0, 1: 10.0}).rates.tolist() == pytest.approx([0.5, 10.0, 0.5])


def test_filling_rejects_what_has_no_rate() -> None:
    with pytest.raises(ValueError, match="flow 1 crosses no link"):
        max_min_rates(np.array([[0], [NONE]]), {0: 1.0})
    with pytest.raises(ValueError, match=r"no capacity for link\(s\) \[7\]"):
        max_min_rates(np.array([[7]]), {0: 1.0})
    with pytest.raises(ValueError, match="link 0 has no positive capacity"):
        max_min_rates(np.array([[0]]), {0: 0.0})


# --- paths and flows ----------------------------------------------------------------------

# Three tiers: 4 pods of 2 blocks, 3 spines per pod, 2 super-spines per plane.
THREE_TIER = FabricSpec(blocks=8, servers_per_block=3, rails=2, spines=3, pods=4, super_spines=2)


@pytest.mark.parametrize("algorithm", ["crc32", "crc16"])
@pytest.mark.parametrize("fabric", [DEFAULT, LARGE, THREE_TIER], ids=["default", "large", "three-tier"])
def test_paths_are_the_hash_models(algorithm: str, fabric: Path | FabricSpec) -> None:
    """The model's vectorised paths equal `topo.hashmodel.predict_path` (which the
    switches are checked against bit for bit in test_topo_hashmodel.py), on two tiers
    and across pods on three."""
    spec = fabric if isinstance(fabric, FabricSpec) else load_spec(fabric)
    plan = AddressPlan(dataclasses.replace(spec, ecmp_hash=algorithm))
    index = FabricIndex(plan)
    rng = random.Random(algorithm)
    nics = list(plan.nics())
    flows = [(rng.choice(nics), rng.choice(nics), rng.randint(*PORT_RANGE)) for _ in range(400)]
    flows = [(a, b, p) for a, b, p in flows if a.ip != b.ip]
    paths = index.paths(index.nics([a.ip for a, _, _ in flows]), index.nics([b.ip for _, b, _ in flows]),
                        np.array([p for _, _, p in flows]))
    for (a, b, sport), row in zip(flows, paths.nodes):
        assert [index.name(n) for n in row if n != NONE] == predict_path(plan, FiveTuple(a.ip, b.ip, sport=sport))
    if spec.tiers == 3:                      # the sample did cross pods
        assert (paths.switch_hops == 5).any()


@pytest.mark.parametrize("fabric", [DEFAULT, LARGE, THREE_TIER], ids=["default", "large", "three-tier"])
def test_a_jobs_candidate_paths_at_once_equal_the_controllers(fabric: Path | FabricSpec) -> None:
    """`FabricIndex.candidate_paths` (GOR's planner in the model, for a whole job)
    gives each flow exactly `controller.paths.candidate_paths`, in the same order:
    within a leaf, one path per spine, and across pods one per spine and super-spine."""
    spec = fabric if isinstance(fabric, FabricSpec) else load_spec(fabric)
    plan = AddressPlan(spec)
    index = FabricIndex(plan)
    rng = random.Random(7)
    nics = list(plan.nics())
    pairs = [(a, b) for a, b in ((rng.choice(nics), rng.choice(nics)) for _ in range(300)) if a.ip != b.ip]
    got = index.candidate_paths(index.nics([a.ip for a, _ in pairs]), index.nics([b.ip for _, b in pairs]))
    assert got == [[tuple(p) for p in candidate_paths(plan, FiveTuple(a.ip, b.ip))] for a, b in pairs]
    assert {len(g) for g in got} >= ({1, spec.spines, spec.spines * spec.super_spines} if spec.tiers == 3
                                     else {spec.spines})


def test_candidate_paths_without_failures_equal_the_graphs() -> None:
    """The no-failure short cut of `controller.paths.candidate_paths` gives what the
    graph search gives when a cable elsewhere is down."""
    plan = AddressPlan(load_spec(LARGE))
    elsewhere = frozenset({frozenset({"b3l7", "sp0"})})
    for src, dst in [("10.0.0.1", "10.0.1.2"), ("10.2.0.3", "10.5.2.1"), ("10.1.1.1", "10.1.1.2")]:
        flow = FiveTuple(src, dst)
        assert candidate_paths(plan, flow) == candidate_paths(plan, flow, elsewhere)


def test_flow_counts_add_up() -> None:
    plan = AddressPlan(load_spec(DEFAULT))
    index = FabricIndex(plan)
    trace = load_trace(TRACE)
    for config in ("stock", "orthogonal"):
        job = job_for(config)
        for flows, pairs in zip(job_step_flows(index, job, trace), step_flows(job, trace)):
            assert len(flows) == len(pairs)
            if not len(flows):
                continue
            paths = index.paths(flows.src, flows.dst, flows.sport)
            alloc = max_min_rates(paths.links, index.capacity_bps)
            # Every flow counted once on every link of its path; no link above capacity.
            assert alloc.flows_per_link.sum() == (paths.links != NONE).sum()
            caps = index.capacity_bps(alloc.links)
            assert np.all(alloc.load_bps <= caps * (1 + 1e-9))
            # Max-min: every flow crosses a full link (it cannot grow alone).
            full = set(alloc.links[alloc.load_bps >= caps * (1 - 1e-9)].tolist())
            assert all(full & set(row[row != NONE].tolist()) for row in paths.links)
            # Each sender's NIC link carries its QPs; flows up from the leaves = flows
            # through the fabric.
            up = [l for l in alloc.links.tolist() if index.is_fabric(np.array([l]))[0]
                  and index.tiers[l // index.nodes] < index.tiers[l % index.nodes]]
            counts = dict(zip(alloc.links.tolist(), alloc.flows_per_link.tolist()))
            assert sum(counts[l] for l in up) == int((paths.switch_hops > 1).sum())
            host_up = [counts[l] for l in alloc.links.tolist() if index.tiers[l // index.nodes] == 0]
            assert set(host_up) == {QPS}


def test_step_flows_leave_nvlink_pairs_out() -> None:
    job = job_for("rail")
    ranks = {r.rank: r for r in job.ranks}
    steps = step_flows(job, load_trace(TRACE))
    assert [len(s) for s in steps] == [0, 8 * QPS, 0, 16 * QPS]      # tp, pp, tp, dp; per QP
    assert all(ranks[a].server != ranks[b].server for s in steps for a, b, _ in s)
    assert {i for s in steps for _, _, i in s} == set(range(QPS))


def test_excess_counts_flows_beyond_the_least_a_leaf_needs() -> None:
    index = FabricIndex(AddressPlan(load_spec(DEFAULT)))

    def count(loads: dict[tuple[str, str], int], qps: int = 1) -> int:
        return excess(index, np.array([index.link_id(a, b) for a, b in loads]), np.array(list(loads.values())), qps)

    assert count({("b0l0", "sp0"): 2, ("sp0", "b1l0"): 2, ("b0h0", "b0l0"): 1}) == 2
    # Three flows out of a leaf over two spines: two on one uplink is the least possible.
    assert count({("b0l0", "sp0"): 2, ("b0l0", "sp1"): 1}) == 0
    assert count({("b0l0", "sp0"): 3}) == 1
    # A link carries one connection's QPs at full pace: two QPs of one ring hop are no collision.
    assert count({("b0l0", "sp0"): 2}, qps=2) == 0
    assert count({("b0l0", "sp0"): 4}, qps=2) == 2


def test_a_perfect_step_pays_headers_a_frame_per_hop_and_a_slice_where_a_rank_waits() -> None:
    # 1 MiB AllReduce over 4 ranks at 10 Mbit/s: 1.5 MiB on the wire per rank, 384
    # frames of 4096 payload bytes; each frame is 4154 bytes on the wire (Ethernet 14,
    # IPv4 20, UDP 8, BTH 12, ICRC 4) and takes 4154 * 8 / 10e6 s.
    cost = StepCost("allreduce", "dp", 1 << 20, 4, 10e6, 1.5 * (1 << 20) * 8 / 10e6)
    frame_s = 4154 * 8 / 10e6
    # The data's 384 frames and one frame per switch hop: a rank sends its own part's
    # slices while the first one it forwards comes in; at half the line rate the data's
    # frames take twice as long.
    assert step_seconds(cost, 1.0, 3, 4096) == pytest.approx((384 + 3) * frame_s)
    assert step_seconds(cost, 2.0, 3, 4096) == pytest.approx((2 * 384 + 3) * frame_s)
    assert step_seconds(cost, 1.0, 1, 4096) == pytest.approx((384 + 1) * frame_s)
    # A chain forwards what it receives: its ranks wait for a slice, 1 MiB cut in 8
    # (`tccl.collectives.MAX_SLICES`): 128 KiB, 32 frames.
    chain = dataclasses.replace(cost, op="broadcast", ideal_s=(1 << 20) * 8 / 10e6)
    assert step_seconds(chain, 1.0, 3, 4096) == pytest.approx((256 + 32 + 3) * frame_s)


# --- configurations and GOR ---------------------------------------------------------------

def test_configurations_on_the_default_fabric() -> None:
    got = evaluate(DEFAULT, TRACE)
    assert list(got) == list(CONFIGS)
    assert all(e.iterations == QPS for e in got.values())
    assert got["stock"].collisions > got["orthogonal"].collisions > 0
    assert got["stock"].busbw_frac < got["orthogonal"].busbw_frac < got["gor"].busbw_frac
    # GOR moves what collides and reaches the same pace from stock's ports and from
    # orthogonal's.
    assert got["stock-gor"].moves > 0 and got["stock-gor"].collisions == 0
    assert got["gor"].moves > 0 and got["gor"].collisions == 0
    assert got["stock-gor"].busbw_frac == pytest.approx(got["gor"].busbw_frac)
    # A step paced by 4 QP flows on a link (2 per connection) takes about twice as long.
    stock_dp, ortho_dp = got["stock"].steps[-1], got["orthogonal"].steps[-1]
    rate = load_spec(DEFAULT).links.uplink_mbps * 1e6
    assert stock_dp.max_flows_per_link == 4 and stock_dp.min_rate_bps == pytest.approx(rate / 4)
    assert ortho_dp.min_rate_bps == pytest.approx(rate / 2) and ortho_dp.collisions == 0


def test_a_pipeline_send_moves_on_one_qp_which_orthogonal_ports_stack() -> None:
    """A pipeline send is one message: it goes whole on one QP of its connection, the
    same index for every pair in an iteration (QP k mod 2 in iteration k). Orthogonal
    ports spread each connection's two QPs over the two spines -- QP 0 on one, QP 1 on
    the other for every pair -- so a leaf's two sends share one uplink and take twice
    the line-rate time; GOR, planning the QPs that send, puts them apart."""
    got = evaluate(DEFAULT, TRACE, [CONFIGS["orthogonal"], CONFIGS["gor"]])
    rate = load_spec(DEFAULT).links.uplink_mbps * 1e6
    for name, pace in (("orthogonal", rate / 2), ("gor", rate)):
        pp = [s for s in got[name].steps if s.group == "pp"]
        assert [s.iteration for s in pp] == list(range(QPS))
        # 8 pairs, one QP each (not 16 QPs at half a NIC).
        assert all(s.flows == 8 and s.min_rate_bps == pytest.approx(pace) for s in pp)
    ortho = [s for s in got["orthogonal"].steps if s.group == "pp"]
    assert all(s.collisions == 8 and s.max_flows_per_link == 2 for s in ortho)     # 4 leaves up, 4 down
    assert all(s.seconds > 1.9 * s.ideal_s for s in ortho)
    assert got["gor"].moves == 8


def test_gor_ports_land_on_its_placement() -> None:
    plan = AddressPlan(load_spec(LARGE))
    index = FabricIndex(plan)
    job = job_for("stock", LARGE)
    flows = job_step_flows(index, job, load_trace(TRACE))[-1]
    before = evaluate_job(index, job, load_trace(TRACE)).steps[-1]
    result = replan(index, flows.src, flows.dst, flows.sport)
    changed = result.sports != flows.sport
    assert result.moves == int(changed.sum()) > 0
    # The new ports are real: the hash model sends the moved flows elsewhere, and the
    # step's busiest fabric link carries fewer flows.
    old = index.paths(flows.src, flows.dst, flows.sport)
    new = index.paths(flows.src, flows.dst, result.sports)
    assert np.all((old.nodes[changed] != new.nodes[changed]).any(axis=1))
    alloc = max_min_rates(new.links, index.capacity_bps)
    fabric = alloc.flows_per_link[index.is_fabric(alloc.links)].tolist()
    assert max(fabric) < before.max_flows_per_link


def test_model_only_fabrics_load() -> None:
    """scale/fabrics/ holds specs beyond the emulated switches: the plan takes them."""
    sizes = {}
    for path in sorted((ROOT / "scale" / "fabrics").glob("*.yaml")):
        spec = load_spec(path, emulated=False)
        sizes[path.stem] = (spec.tiers, len(AddressPlan(spec, emulated=False).leaves) * spec.servers_per_block)
    assert sizes == {"cluster-100k": (3, 102400), "two-tier-max": (2, 1736)}


# --- command line -------------------------------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scale", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_cli_table_json_and_plots(tmp_path: Path) -> None:
    run = _cli(str(DEFAULT), str(TRACE), "--configs", "stock,orthogonal", "--json", str(tmp_path / "s.json"),
               "--plots", str(tmp_path), "--gpus", "16,32")
    assert run.returncode == 0, run.stderr
    header, rule, stock, ortho = run.stdout.splitlines()[:4]
    assert header.split()[:2] == ["config", "GPUs"] and stock.split()[:2] == ["stock", "16"]
    assert ortho.startswith("orthogonal")
    import json
    doc = json.loads((tmp_path / "s.json").read_text())
    assert set(doc["configs"]) == {"stock", "orthogonal"}
    assert [g for g, _ in doc["busbw_vs_gpus"]["orthogonal"]] == [16, 32]
    for png in ("link-loads.png", "busbw-vs-gpus.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_grows_a_three_tier_spec_by_pods(tmp_path: Path) -> None:
    spec = tmp_path / "three.yaml"
    spec.write_text(yaml.safe_dump({"blocks": 8, "servers_per_block": 3, "rails": 2, "spines": 3, "pods": 4,
                                    "super_spines": 2}))
    run = _cli(str(spec), str(TRACE), "--configs", "rail", "--gpus", "6,24,48", "--json", str(tmp_path / "s.json"))
    assert run.returncode == 0, run.stderr
    import json
    # 6 GPUs: one block of one pod; 24 and 48: two and four pods of 12.
    assert [g for g, _ in json.loads((tmp_path / "s.json").read_text())["busbw_vs_gpus"]["rail"]] == [6, 24, 48]


def test_cli_names_what_is_wrong(tmp_path: Path) -> None:
    bad_spec = tmp_path / "bad.yaml"
    bad_spec.write_text("blocks: 2\nservers_per_block: 2\nrails: 0\nspines: 2\n")
    run = _cli(str(bad_spec), str(TRACE))
    assert run.returncode == 2 and f"{bad_spec}: rails: must be at least 1" in run.stderr
    bad_trace = tmp_path / "t.yaml"
    bad_trace.write_text("steps:\n  - {compute_ms: 1}\n  - {op: allreduce, group: rails, size: 8}\n")
    run = _cli(str(DEFAULT), str(bad_trace))
    assert run.returncode == 2 and f"{bad_trace}: steps[1].group: one of" in run.stderr
    run = _cli(str(DEFAULT), str(TRACE), "--gpus", "10000000")
    assert run.returncode == 2 and "10000000 GPUs need 1250000 blocks of 8" in run.stderr \
        and "blocks: 1250000 blocks take 21 address bits, leaving room for 0 rails" in run.stderr
    run = _cli(str(DEFAULT), str(TRACE), "--configs", "stock,fast")
    assert run.returncode == 2 and "unknown configuration(s) ['fast']" in run.stderr


@pytest.mark.parametrize("seed", range(6))
def test_max_min_rates_are_max_min_fair_through_many_bottleneck_levels(seed):
    """Progressive filling shrinks what still grows as flows freeze (incidences, flows,
    and the links, compacted as they empty): on random paths with many bottleneck
    levels the rates stay max-min fair -- no link over its capacity, and every flow
    has a full link on its path on which no flow gets more."""
    rng = np.random.default_rng(seed)
    n, links = 600, 120
    paths = np.full((n, 4), NONE)
    for f in range(n):
        k = int(rng.integers(1, 5))
        paths[f, :k] = rng.choice(links, k, replace=False)
    cap = {i: float(rng.integers(1, 40)) * 1e6 for i in range(links)}
    alloc = max_min_rates(paths, cap)
    load = {int(l): float(b) for l, b in zip(alloc.links, alloc.load_bps)}
    assert all(load[l] <= cap[l] * (1 + 1e-9) for l in load)
    on = {l: [f for f in range(n) if l in paths[f]] for l in load}
    for f in range(n):
        assert any(load[l] >= cap[l] * (1 - 1e-9) and
                   all(alloc.rates[g] <= alloc.rates[f] * (1 + 1e-9) for g in on[l])
                   for l in paths[f] if l != NONE), f
