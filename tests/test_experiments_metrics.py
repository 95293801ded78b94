"""Experiment numbers from recorded data (no root): busbw per collective with
nccl-tests' formulas, utilisation from counter snapshots, the per-repeat and
per-configuration rows, the hash model's collision count, the table, the failure
scenario's recovery time."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from controller.telemetry import LinkMap
from experiments import collisions
from experiments.configs import CONFIGS, build_job, parse_configs, prepare_trace
from experiments.failure import delivered_rate, recovery_seconds
from experiments.metrics import (MetricsError, busbw_frac, compute_seconds, job_iterations, spread,
                                 step_costs, utilisation)
from experiments.recorder import Interval, Round, link_intervals, window
from experiments.summary import REQUIRED, config_row, link_numbers, repeat_numbers
from experiments.table import format_table
from tccl.results import Row
from tccl.trace import load_trace, parse_trace
from tccl.traffic import traffic_line
from topo.addressing import AddressPlan
from topo.spec import at_link_rate, load_spec

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "topo" / "fabrics" / "default.yaml"
TRACE = ROOT / "traces" / "dp_tp_pp.yaml"


def job_for(config: str, trace: Path = TRACE):
    return build_job(DEFAULT, trace, CONFIGS[config], seed=1)


# --- busbw -------------------------------------------------------------------------------

@pytest.mark.parametrize("op,group,factor", [
    ("allreduce", "dp", 2 * 3 / 4),        # 4 servers per rail: 2(n-1)/n
    ("allreduce", "all", 2 * 15 / 16),
    ("allgather", "dp", 3 / 4),
    ("reducescatter", "all", 15 / 16),
    ("alltoall", "dp", 3 / 4),
])
def test_step_cost_uses_the_nccl_tests_bus_factor(op: str, group: str, factor: float) -> None:
    trace = parse_trace({"steps": [{"op": op, "group": group, "size": 1 << 20}]})
    (cost,) = step_costs(trace, job_for("rail").ranks, 10e6)
    assert cost.ideal_s == pytest.approx(factor * (1 << 20) * 8 / 10e6)


def test_sendrecv_moves_its_size_once_and_nvlink_steps_use_nvlink() -> None:
    trace = parse_trace({"steps": [{"op": "sendrecv", "group": "pp", "size": 65536},
                                   {"compute_ms": 40},
                                   {"op": "allreduce", "group": "tp", "size": 131072}]})
    pp, tp = step_costs(trace, job_for("rail").ranks, 10e6, nvlink_bps=1e9)
    assert pp.ideal_s == pytest.approx(65536 * 8 / 10e6)
    assert tp.ranks == 4 and tp.ideal_s == pytest.approx(1.5 * 131072 * 8 / 1e9)
    assert compute_seconds(trace) == pytest.approx(0.040)


def test_busbw_frac_of_one_collective_is_nccl_tests_busbw_over_the_link() -> None:
    size, seconds, link_bps = 1 << 20, 2.5, 10e6
    trace = parse_trace({"steps": [{"compute_ms": 50}, {"op": "allreduce", "group": "all", "size": size}]})
    ideal = sum(c.ideal_s for c in step_costs(trace, job_for("rail").ranks, link_bps))
    row = Row.measure("allreduce", size, 16, seconds, 0)
    assert busbw_frac(ideal, seconds + 0.050, 0.050) == pytest.approx(row.busbw_mbps * 1e6 / link_bps)


def test_busbw_frac_needs_communication_time() -> None:
    with pytest.raises(MetricsError, match="not longer than its"):
        busbw_frac(0.3, 0.04, 0.05)


def test_job_iteration_is_the_slowest_server_per_iteration() -> None:
    assert job_iterations({"a": [1.0, 2.0, 1.5], "b": [1.2, 1.1, 1.6]}) == [1.2, 2.0, 1.6]
    with pytest.raises(MetricsError, match="different iteration counts"):
        job_iterations({"a": [1.0], "b": [1.0, 2.0]})
    with pytest.raises(MetricsError):
        job_iterations({})


def test_spread_is_median_min_max() -> None:
    s = spread([3.0, 1.0, 2.0, 10.0])
    assert (s.median, s.low, s.high, s.n) == (2.5, 1.0, 10.0, 4)


# --- utilisation from counters -----------------------------------------------------------

def test_utilisation_is_bytes_over_capacity() -> None:
    assert utilisation(1_250_000, 1.0, 10e6) == pytest.approx(1.0)
    assert utilisation(312_500, 0.5, 10e6) == pytest.approx(0.5)
    with pytest.raises(MetricsError):
        utilisation(1, 0.0, 10e6)


def _stats(sent: int, drops: int = 0, depth: int = 0) -> dict:
    return {"sent_bytes": sent, "sent_packets": sent // 1000, "drops": drops, "qdepth": depth}


def test_link_intervals_from_traffic_manager_snapshots() -> None:
    plan = AddressPlan(load_spec(DEFAULT))
    links = LinkMap(plan)
    up = plan.uplink_port(0)
    r0 = Round(10.0, 1000.0, {"b0l0": {up: _stats(0), 1: _stats(500)}}, {"b0l0": 10.0})
    # The switch answered 0.5 s after the first poll, although the round ended later.
    full = int(plan.spec.links.uplink_mbps * 1e6 / 8 * 0.5)     # the uplink busy for 0.5 s
    r1 = Round(10.9, 1000.9, {"b0l0": {up: _stats(full, drops=3, depth=7), 1: _stats(500)}}, {"b0l0": 10.5})
    r2 = Round(11.5, 1001.5, {"b0l0": {up: _stats(1000), 1: _stats(500)}}, {"b0l0": 11.5})  # restarted
    series = link_intervals(links, [r0, r1, r2])
    first, second = series["b0l0->sp0"]
    assert first.seconds == pytest.approx(0.5) and first.util == pytest.approx(1.0)
    assert (first.bytes, first.drops, first.queue_depth) == (full, 3, 7)
    assert second.bytes == 1000                      # counters that went backwards restart at 0
    assert [iv.bytes for iv in series["b0l0->b0h0"]] == [0, 0]
    assert series["sp0->b1l0"] == []                 # a switch that never answered
    assert [r.t for r in window([r0, r1, r2], 10.2, 10.95)] == [10.0, 10.9, 11.5]


def test_link_intervals_use_the_switch_s_own_read_time_when_it_gives_one() -> None:
    plan = AddressPlan(load_spec(DEFAULT))
    up = plan.uplink_port(0)
    # Answers arrived 0.5 s apart, but the switch read its counters 0.25 s apart.
    r0 = Round(10.0, 1000.0, {"b0l0": {up: {**_stats(0), "t_us": 20_000_000}}}, {"b0l0": 10.0})
    full = int(plan.spec.links.uplink_mbps * 1e6 / 8 * 0.25)    # the uplink busy for 0.25 s
    r1 = Round(10.5, 1000.5, {"b0l0": {up: {**_stats(full), "t_us": 20_250_000}}}, {"b0l0": 10.5})
    (only,) = link_intervals(LinkMap(plan), [r0, r1])["b0l0->sp0"]
    assert only.seconds == pytest.approx(0.25) and only.util == pytest.approx(1.0)


def _iv(t: float, util: float, nbytes: int | None = None, drops: int = 0) -> Interval:
    b = int(util * 10e6 / 8 * 0.25) if nbytes is None else nbytes
    return Interval(t, t, 0.25, b, b // 1000, drops, 0, util)


def test_link_numbers_over_the_active_window_on_fabric_links() -> None:
    leaves, spines, hosts = {"b0l0", "b1l0"}, {"sp0", "sp1"}, {"b0h0", "b1h0"}
    intervals = {
        "b0l0->sp0": [_iv(1.0, 0.9), _iv(1.25, 1.0), _iv(1.5, 0.2), _iv(9.0, 0.0)],
        "b0l0->sp1": [_iv(1.0, 0.0), _iv(1.25, 0.0), _iv(1.5, 0.0)],
        "b1l0->b1h0": [_iv(0.75, 0.0), _iv(1.0, 0.5), _iv(1.5, 0.5, drops=2), _iv(9.0, 0.0)],
    }
    out = link_numbers(intervals, leaves, spines, hosts)
    assert out["links"]["b0l0->sp0"] == {"max_util": 1.0, "mean_util": pytest.approx(0.7, abs=1e-4)}
    assert out["max_link_util"] == 1.0
    assert out["mean_link_util"] == pytest.approx(0.35, abs=1e-4)   # idle links count
    assert out["drops"] == 2 and out["active_s"] == 0.5
    assert "b1l0->b1h0" not in out["links"]


def test_repeat_and_config_rows() -> None:
    traffic = {"bytes_by_step": {"allreduce/tp": 100, "alltoall/ep": 40},
               "bytes_by_channel": {"nvlink": 100, "leaf": 30, "spine": 10, "superspine": 0},
               "bytes_by_step_channel": {"allreduce/tp": {"nvlink": 100}, "alltoall/ep": {"leaf": 30, "spine": 10}}}
    results = {"b0h0": {"iteration_s": [0.5, 0.7, 0.6], "traffic": traffic,
                        "flows": [{"cnps": 3, "ce_marked_rx": 5, "retransmits": 1}]},
               "b1h0": {"iteration_s": [0.55, 0.6, 0.9], "traffic": traffic,
                        "flows": [{"cnps": 1, "ce_marked_rx": 2}]}}
    links = {"max_link_util": 0.97, "mean_link_util": 0.4, "drops": 4, "links": {"b0l0->sp0": {}}}
    events = [{"event": "detect", "loop": 1, "t": 10.0}, {"event": "moved", "loop": 1, "t": 10.8, "latency_s": 0.8,
                                                          "from_alarm_s": 1.3},
              {"event": "verified", "loop": 1, "t": 11.1, "latency_s": 1.1},
              {"event": "moved", "loop": 3, "t": 12.0, "planned_s": 0.05},
              {"event": "detect", "loop": 2, "t": 20.0}, {"event": "failed", "loop": 2, "t": 20.1}]
    r = repeat_numbers(results, ideal_comm_s=0.35, compute_s=0.05, links=links, events=events)
    assert r["iterations_s"] == [0.55, 0.7, 0.9] and r["iteration_s"] == 0.7
    assert r["busbw_frac"] == pytest.approx(0.35 / 0.65)
    assert (r["ecn_marks"], r["cnps"], r["drops"], r["retransmits"]) == (7, 4, 4, 1)
    # A plan's move (at the agents' first listing, no alarm) is a move, not a loop time.
    assert (r["gor_moves"], r["gor_planned_moves"], r["gor_loops"]) == (2, 1, 2)
    assert r["gor_loop_s"] == pytest.approx(0.8)
    assert r["gor_loop_s_p99"] == pytest.approx(0.8)
    # The agent's answer is the move; the first sample on the new path its own figure.
    assert r["gor_verified_s"] == pytest.approx(1.1) and r["gor_verify_latencies_s"] == [1.1]
    # Dated from the alarm's last level change rather than its episode: beside it.
    assert r["gor_from_alarm_latencies_s"] == [1.3]
    assert r["busbw_per_iteration"] == [pytest.approx(0.35 / (t - 0.05), abs=1e-4) for t in (0.55, 0.7, 0.9)]
    assert r["busbw_frac_rest"] == pytest.approx(0.35 / (0.8 - 0.05))   # median of 0.7 and 0.9
    # Both agents' bytes, summed: a TP AllReduce that stayed on NVLink shows as such.
    assert r["traffic"]["bytes_by_step"] == {"allreduce/tp": 200, "alltoall/ep": 80}
    assert r["traffic"]["bytes_by_channel"] == {"nvlink": 200, "leaf": 60, "spine": 20, "superspine": 0}
    assert r["traffic"]["bytes_by_step_channel"]["alltoall/ep"] == {"leaf": 60, "spine": 20}
    assert traffic_line(r["traffic"]).startswith("bytes by channel: nvlink 200, leaf 60, spine 20, superspine 0;")
    other = dict(r, iteration_s=0.9, busbw_frac=0.4, gor_moves=3, gor_loop_s=None,
                 gor_move_latencies_s=[0.3, 2.5, 0.4], gor_verify_latencies_s=[0.6, 2.9])
    row = config_row([r, other, dict(r, iteration_s=0.5)], {"collisions": 2})
    # Detect -> moved over every move of every repeat: 0.3 0.4 0.8 0.8 2.5.
    assert row["gor_loop_s"] == pytest.approx(0.8) and row["gor_loop_s_p99"] == pytest.approx(2.5)
    # Detect -> verified likewise: 0.6 1.1 1.1 2.9.
    assert row["gor_verified_s"] == pytest.approx(1.1) and row["gor_verified_s_p99"] == pytest.approx(2.9)
    assert row["gor_loop_from_alarm_s"] == pytest.approx(1.3) == row["gor_loop_from_alarm_s_p99"]
    assert set(REQUIRED) <= set(row)
    assert row["iteration_s"] == 0.7 and row["gor_moves"] == 2 and row["collisions"] == 2
    assert row["iteration_s_spread"] == {"median": 0.7, "min": 0.5, "max": 0.9, "n": 3}
    assert len(row["repeats"]) == 3 and "links" not in row["repeats"][0]
    assert row["traffic"] == r["traffic"]
    with pytest.raises(MetricsError):
        repeat_numbers({"x": {}}, 0.3, 0.0, links, [])


# --- hash model ----------------------------------------------------------------------------

def test_hash_model_predicts_stock_collisions_and_orthogonal_ports_only_in_pipeline_sends() -> None:
    plan = AddressPlan(load_spec(DEFAULT))
    trace = load_trace(TRACE)
    stock = collisions.analyse(plan, job_for("stock"), trace)
    ortho = collisions.analyse(plan, job_for("orthogonal"), trace)
    assert stock["collisions"] > ortho["collisions"] and stock["model_busbw_frac"] <= 0.5
    # Orthogonal ports spread every connection's QPs, but a pipeline send is one
    # message on one QP of the same index for every pair: 2 of a leaf's sends on one
    # uplink (4 leaves up, 4 down), a ring's QPs never beyond one per link.
    assert ortho["collisions"] == 8 and ortho["max_flows_per_link"] == 2
    # GOR's placement (the model of its steady state) undoes both; with nothing shared,
    # only frame headers and the frames' store and forward keep the model below 1.
    gor = collisions.analyse(plan, job_for("stock-gor"), trace, gor=True)
    assert gor["collisions"] == stock["collisions"] and gor["model_gor_moves"] > 0
    assert ortho["model_busbw_frac"] < gor["model_busbw_frac"] < 0.99
    planned = collisions.analyse(plan, job_for("gor"), trace, gor=True)
    assert planned["model_busbw_frac"] == pytest.approx(gor["model_busbw_frac"])
    # Random ports meet collisions on average; the hostfile order makes more of them.
    assert collisions.expected_random(plan, job_for("stock"), trace, 40) > \
        collisions.expected_random(plan, job_for("rail"), trace, 40) > 0


def test_jobs_that_differ_only_in_name_and_ports_share_their_random_draws() -> None:
    """`prepare` computes one mean of random draws per key: the key must hold all the
    draws depend on (the hostfile order does) and nothing they replace."""
    plan = AddressPlan(load_spec(DEFAULT))
    trace = load_trace(TRACE)
    key = {name: collisions.random_draws_key(job_for(name)) for name in CONFIGS}
    assert key["stock"] == key["stock-gor"] != key["rail"] == key["orthogonal"] == key["gor"]
    assert collisions.expected_random(plan, job_for("stock-gor"), trace, 10) == \
        collisions.expected_random(plan, key["stock"], trace, 10)
    assert collisions.expected_random(plan, job_for("gor"), trace, 10) == \
        collisions.expected_random(plan, key["rail"], trace, 10)


# --- configurations, table, failure --------------------------------------------------------

def test_configs_and_trace_copies(tmp_path: Path) -> None:
    assert [c.name for c in parse_configs("gor, stock")] == ["gor", "stock"]
    (extra,) = parse_configs("stock-gor")
    assert (extra.order, extra.ports, extra.gor) == ("input", "random", True)
    assert list(CONFIGS) == ["stock", "stock-gor", "rail", "orthogonal", "gor"]   # the default table
    with pytest.raises(ValueError, match="unknown configuration"):
        parse_configs("stock,fast")
    path = prepare_trace(TRACE, tmp_path / "t.yaml", iterations=1, size_scale=0.25)
    t = load_trace(path)
    assert t.iterations == 1 and [s.size for s in t.steps if s.op] == [32768, 16384, 32768, 65536]
    with pytest.raises(ValueError):
        prepare_trace(TRACE, tmp_path / "u.yaml", size_scale=0)
    # Given the fabric, sizes stated at 10 Mbit/s are restated for its links (x 2 at 20).
    fast = tmp_path / "fast.yaml"
    fast.write_text(yaml.safe_dump(at_link_rate(yaml.safe_load(DEFAULT.read_text()), 20)))
    t = load_trace(prepare_trace(TRACE, tmp_path / "f.yaml", iterations=1, size_scale=0.25, fabric=fast))
    assert [s.size for s in t.steps if s.op] == [65536, 32768, 65536, 131072]
    stock, gor = job_for("stock"), job_for("gor")
    assert stock.ranks == gor.ranks                       # the same job, the same hostfile
    # NVLink is restated with the sizes: 100x the NICs at any rate (2 Gbit/s at 20 Mbit/s).
    assert stock.transport.nvlink_gbps == pytest.approx(100 * stock.transport.line_mbps / 1000) == 1.0
    assert build_job(fast, TRACE, CONFIGS["gor"], seed=1).transport.nvlink_gbps == pytest.approx(2.0)
    assert (stock.workload.order, stock.transport.ports) == ("input", "random")
    assert (gor.workload.order, gor.transport.ports) == ("rail", "orthogonal")


def test_table_has_a_row_per_config_with_spread_and_model() -> None:
    row = {"iteration_s": 0.9, "iteration_s_spread": {"median": 0.9, "min": 0.8, "max": 1.1, "n": 3},
           "busbw_frac": 0.41, "busbw_frac_spread": {"median": 0.41, "min": 0.4, "max": 0.5, "n": 3},
           "model_busbw_frac": 0.5, "collisions": 8, "collisions_expected_random": 12.25,
           "max_link_util": 0.99, "mean_link_util": 0.2, "ecn_marks": 10, "cnps": 4, "drops": 0,
           "gor_moves": 0, "gor_loop_s": None}
    text = format_table({"stock": row, "gor": dict(row, gor_moves=2, gor_loop_s=0.75, gor_loop_s_p99=0.9,
                                                    gor_verified_s=1.0, gor_verified_s_p99=1.25)})
    lines = text.splitlines()
    assert len(lines) == 4 and lines[2].startswith("stock") and lines[3].startswith("gor")
    assert "0.900 (0.800-1.100)" in lines[2] and "8 (12.2)" in lines[2]
    # GOR's moves, loop time and verified time, then the fidelity column ("-": no
    # fidelity recorded).
    assert lines[3].split()[-4:] == ["2", "0.75/0.90", "1.00/1.25", "-"] and lines[2].split()[-3:] == ["-"] * 3


def test_a_configuration_with_an_unfaithful_repeat_is_marked_in_the_table() -> None:
    good = {"faithful": True, "problems": [], "p99_lateness_pkt": 0.2, "on_time_frac": 0.99,
            "kernel_drops": 0, "dilation": 1.0}
    bad = dict(good, faithful=False, problems=["p99 lateness 3.00 packet times > 1"],
               p99_lateness_pkt=3.0, on_time_frac=0.8)
    base = {"iteration_s": 0.9, "busbw_frac": 0.4, "ecn_marks": 0, "cnps": 0, "drops": 0,
            "gor_moves": 0, "links": {}}
    ok_row = config_row([dict(base, fidelity=good), dict(base, fidelity=good)])
    bad_row = config_row([dict(base, fidelity=good), dict(base, fidelity=bad)])
    assert ok_row["fidelity"]["faithful"] and not bad_row["fidelity"]["faithful"]
    assert bad_row["fidelity"]["p99_lateness_pkt"] == 3.0 and bad_row["fidelity"]["unfaithful_repeats"] == 1
    text = format_table({"orthogonal": ok_row, "stock": bad_row})
    assert "ok (0.20 pkt)" in text.splitlines()[2]
    assert "UNFAITHFUL 1/2 (3.00 pkt)" in text.splitlines()[3]
    # The host's steal beside it, the worst of the unfaithful repeats' (a faithful
    # repeat's is no cause of anything).
    stolen = [dict(base, fidelity=dict(good, host_steal_frac=0.4)),
              dict(base, fidelity=dict(bad, host_steal_frac=0.27)), dict(base, fidelity=dict(bad, host_steal_frac=0.05))]
    row = config_row(stolen)
    assert row["fidelity"]["unfaithful_host_steal"] == 0.27 and bad_row["fidelity"]["unfaithful_host_steal"] is None
    assert "UNFAITHFUL 2/3 (3.00 pkt, steal 27 %)" in format_table({"stock": row}).splitlines()[2]
    # And the dilation the latest repeat would fit at (a faithful repeat's is its own).
    needing = config_row([dict(base, fidelity=dict(good, dilation=1.0, dilation_needed=1.0)),
                          dict(base, fidelity=dict(bad, dilation=1.0, dilation_needed=4.0)),
                          dict(base, fidelity=dict(bad, dilation=1.0, dilation_needed=3.25))])
    assert needing["fidelity"]["dilation_needed"] == 4.0
    assert "UNFAITHFUL 2/3 (3.00 pkt, fits at dilation 4)" in format_table({"stock": needing}).splitlines()[2]


def test_recovery_is_the_end_of_the_last_stall() -> None:
    rate = [(1.0, 100.0), (1.25, 90.0), (1.5, 110.0), (2.0, 80.0), (2.25, 5.0), (2.5, 0.0),
            (2.75, 60.0), (3.0, 0.0), (3.25, 100.0), (9.0, 0.0)]
    assert recovery_seconds(rate, t_fail=2.0, t_back=2.6, settle_s=0.5) == pytest.approx(1.0)
    assert recovery_seconds([(1.0, 100.0), (2.5, 90.0)], 2.0, 2.6) == 0.0
    # The job ran through the failure and ended inside the settling window: no stall.
    ended = [(1.0, 100.0), (1.25, 90.0), (2.25, 95.0), (2.5, 100.0), (2.75, 0.0), (3.0, 0.0)]
    assert recovery_seconds(ended, t_fail=2.0, t_back=2.6, settle_s=0.5) == 0.0
    # Stalled at the failure and never busy again: a stall to the end of the window.
    never = [(1.0, 100.0), (1.25, 90.0), (2.25, 0.0), (2.5, 0.0), (2.75, 0.0), (3.0, 0.0)]
    assert recovery_seconds(never, t_fail=2.0, t_back=2.6, settle_s=0.5) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="baseline"):
        recovery_seconds([(3.0, 1.0)], 2.0, 2.5)
    intervals = {"b0l0->b0h0": [_iv(1.0, 0.5)], "b1l0->b1h0": [_iv(1.0, 0.5)], "b0l0->sp0": [_iv(1.0, 1.0)]}
    ((t, bps),) = delivered_rate(intervals, {"b0h0", "b1h0"})
    assert t == 1.0 and bps == pytest.approx(2 * 0.5 * 10e6 / 8)
