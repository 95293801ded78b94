"""The published models of the validity checks (experiments/validity/reference.py)
against hand-computed values, and the DCQCN profiles a fabric spec names
(topo/ccprofiles.py): scaled marking, the agents' constants, errors naming the key."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from experiments.runner import write_spec
from experiments.validity import reference as ref
from tccl.dcqcn import DcqcnParams, Scale
from tccl.job import Transport, Workload, job_from_fabric, load_job
from topo.ccprofiles import PROFILES
from topo.spec import SpecError, load_spec, parse_spec

SMALL = {"blocks": 1, "servers_per_block": 2, "rails": 1, "spines": 1}


def test_one_cnp_at_alpha_one_halves_and_fast_recovery_halves_the_gap():
    line = 10e6
    cut = ref.cut(line, 1.0)
    assert cut == line / 2
    rates = ref.recovery(line, cut, 7, 5, rate_ai=0.01 * line, line_rate=line)
    # Gap to Rt after k events: (Rt - Rc0) / 2^k for the F = 5 fast-recovery events.
    assert rates[:6] == pytest.approx([line * (1 - 2 ** -(k + 1)) for k in range(6)])
    # Then additive increase: Rt stays at line rate (clamped), so the gap halves again.
    assert rates[6] == pytest.approx(line * (1 - 2 ** -7))
    below = ref.recovery(0.9 * line, 0.45 * line, 6, 5, rate_ai=0.01 * line, line_rate=line)
    assert below[6] == pytest.approx((0.91 * line + below[5]) / 2)     # Rt += R_AI first


def test_alpha_decays_per_timer_and_rises_by_g_on_a_cnp():
    g = 1 / 256
    assert ref.alpha_decayed(1.0, g, 9) == pytest.approx((255 / 256) ** 9)
    assert ref.alpha_after_cnp(0.5, g) == pytest.approx(0.5 * 255 / 256 + 1 / 256)


def test_pfc_shares_per_ingress_port_dcqcn_per_flow():
    tree = {"spine": {"a": "a", "b": "b", "c": "c"}, "host": "d"}
    assert ref.pfc_shares(tree) == pytest.approx({"a": 1 / 6, "b": 1 / 6, "c": 1 / 6, "d": 1 / 2})
    assert ref.dcqcn_shares(tree) == pytest.approx({k: 1 / 4 for k in "abcd"})
    # Two tiers of ports: a quarter through the nested pair, half alone.
    assert ref.pfc_shares({"up": {"x": {"p": "p", "q": "q"}, "y": "y"}, "z": "z"})["p"] == pytest.approx(1 / 8)


def test_victim_keeps_what_the_incast_leaves_of_its_links():
    # Three into one NIC: 1/3 each; two of them on the victim's links leave it 1/3.
    assert ref.victim_fair_shares() == pytest.approx({"incast": 1 / 3, "victim": 1 / 3})
    # Four into one, one of them beside the victim: 3/4 left to it.
    assert ref.victim_fair_shares(incast=4, sharing=1)["victim"] == pytest.approx(3 / 4)


def test_published_profiles_scale_their_marking_to_packets():
    # paper: 5/200 KB at 40G -> x (10M/40G) x 200 = 250 B / 10 KB, in 4218-byte frames.
    paper = parse_spec({**SMALL, "dcqcn": "paper"})
    assert (paper.ecn.kmin, paper.ecn.kmax, paper.ecn.pmax) == (0, 2, 0.01)
    # production: 100/400 KB per 25G -> 8 KB / 32 KB: 2 and 8 frames.
    prod = parse_spec({**SMALL, "dcqcn": "production"})
    assert (prod.ecn.kmin, prod.ecn.kmax, prod.ecn.pmax) == (2, 8, 0.2)
    # An explicit ecn section wins; the testbed profile keeps the spec's.
    own = parse_spec({**SMALL, "dcqcn": "paper", "ecn": {"kmin": 3, "kmax": 9}})
    assert (own.ecn.kmin, own.ecn.kmax) == (3, 9)
    assert parse_spec(SMALL).ecn == parse_spec({**SMALL, "dcqcn": "testbed"}).ecn
    assert parse_spec(SMALL).dcqcn == PROFILES["testbed"]


def test_profiles_give_the_agents_their_constants_from_their_own_line_rate():
    assert DcqcnParams.from_profile(PROFILES["testbed"]) == DcqcnParams()
    paper = DcqcnParams.from_profile(PROFILES["paper"])
    assert (paper.line_rate, paper.rate_ai, paper.byte_counter) == (40e9, 40e6, 10e6)
    scaled = paper.scaled(Scale.for_line_rate(10e6, 200, paper.line_rate))
    assert scaled.line_rate == pytest.approx(10e6) and scaled.rate_ai == pytest.approx(10e3)
    assert scaled.rate_timer == pytest.approx(55e-6 * 200) and scaled.byte_counter == pytest.approx(500e3)
    simai = parse_spec({**SMALL, "dcqcn": {"profile": "production", "rate_timer_us": 900}}).dcqcn
    assert DcqcnParams.from_profile(simai).rate_timer == pytest.approx(900e-6)
    none = parse_spec({**SMALL, "dcqcn": {"byte_counter_kb": 0}}).dcqcn
    assert DcqcnParams.from_profile(none).byte_counter == float("inf")


def test_a_job_carries_the_spec_profile_through_its_file(tmp_path: Path):
    spec_file = write_spec(parse_spec({**SMALL, "dcqcn": "production"}), tmp_path / "f.yaml")
    assert load_spec(spec_file).dcqcn == PROFILES["production"]      # the dump reads back
    job = job_from_fabric(spec_file, Workload(), Transport(timeline_s=0.01))
    assert job.transport.dcqcn_profile == PROFILES["production"]
    assert job.transport.dcqcn().rate_timer == pytest.approx(300e-6 * 200)
    job.save(tmp_path / "job.yaml")
    again = load_job(tmp_path / "job.yaml")
    assert again.transport == job.transport


@pytest.mark.parametrize("value, words", [
    ("nature", "dcqcn.profile: one of testbed, paper, production, got 'nature'"),
    ({"rate_timer": 5}, "dcqcn.rate_timer: unknown key"),
    ({"g": -1}, "dcqcn.g: must be a number > 0"),
    ({"g": 2}, "dcqcn.g: alpha's gain, in (0, 1)"),
    ({"fast_recovery_steps": 2.5}, "dcqcn.fast_recovery_steps: a whole number"),
    ({"kmin_kb": 5}, "kmin_kb, kmax_kb and pmax go together"),
    ({"profile": "paper", "kmax_kb": 1}, "dcqcn.kmax_kb: must be above kmin_kb"),
    ({"profile": "paper", "pmax": 1.5}, "dcqcn.pmax: a probability"),
    (3, "dcqcn: expected str or dict, got 3"),
])
def test_bad_profiles_name_the_key(value, words):
    with pytest.raises(SpecError) as err:
        parse_spec({**SMALL, "dcqcn": value}, "x.yaml")
    assert str(err.value).startswith("x.yaml: ") and words in str(err.value), str(err.value)


def test_fluid_model_shares_the_link_and_holds_the_queue_on_the_ramp():
    from experiments.validity.fluid import _event_rate, integrate
    from topo.spec import EcnProfile

    assert _event_rate(0.0, 8.0) == pytest.approx(1 / 8)          # no marks: every B packets
    assert _event_rate(0.5, 2.0) == pytest.approx(0.5 / 3)        # p / ((1-p)^-n - 1)
    assert _event_rate(0.1, float("inf")) == 0.0                    # no such counter
    params = Transport(time_factor=200, line_mbps=10).dcqcn()
    ecn = EcnProfile(5, 20, 0.2)
    run = integrate(params, ecn, 10e6, 4154, [0.0, 0.5], 3.0, 0.007, dt=2e-4)
    late = run.t > 2.5
    rates = run.rc[late].mean(axis=0)
    assert rates == pytest.approx([5e6, 5e6], rel=0.1)              # fair share, as the paper's
    assert rates.sum() == pytest.approx(10e6, rel=0.03)             # the link kept full
    assert ecn.kmin < run.q[late].mean() < ecn.kmax                 # on the marking ramp
    assert run.rc[(run.t > 0.2) & (run.t < 0.5), 0].min() == pytest.approx(10e6)  # alone: line rate


def test_fluid_model_settles_on_its_published_fixed_point():
    # CoNEXT 2016, section 3.2, Theorem 1: the model's steady state solved from its
    # equations; the integrated model must reach it (alpha's time constant, tau'/g,
    # is 2.8 s at this scale: the last 5 of 25 s are settled).
    from experiments.validity.fluid import fixed_point, integrate
    from topo.spec import EcnProfile

    params = Transport(time_factor=200, line_mbps=10).dcqcn()
    ecn = EcnProfile(5, 20, 0.2)
    two = fixed_point(params, ecn, 10e6, 4154, 2)
    assert two.rate_bps == 5e6 and ecn.kmin < two.q < ecn.kmax
    assert two.q == pytest.approx(ecn.kmin + two.p / ecn.pmax * (ecn.kmax - ecn.kmin))
    run = integrate(params, ecn, 10e6, 4154, [0.0, 0.5], 25.0, 0.007, dt=1e-3)
    settled = run.t > 20
    assert run.q[settled].mean() == pytest.approx(two.q, rel=0.01)
    assert run.rc[settled].mean(axis=0) == pytest.approx([5e6, 5e6], rel=0.01)
    # More flows mark more (p* grows with N, eq. fixedp); past Pmax the queue sits at Kmax.
    assert fixed_point(params, ecn, 10e6, 4154, 3).p > two.p
    assert fixed_point(params, EcnProfile(5, 20, 0.01), 10e6, 4154, 2).q == 20
    with pytest.raises(ValueError, match="flows must be >= 1"):
        fixed_point(params, ecn, 10e6, 4154, 0)


def test_packet_level_flows_share_near_fair_and_need_the_increase():
    # The agents' rate machine packet by packet (experiments/validity/packets.py), the
    # two-flows check's parameters: over 100 seeds the first flow's share of ~8 s was
    # 0.487-0.567 (docs/validation.md, check 2), the queue's median 10-12 packets.
    import dataclasses

    from experiments.validity.packets import two_flows
    from topo.spec import EcnProfile

    params = Transport(time_factor=200, line_mbps=10).dcqcn()
    ecn = EcnProfile(5, 20, 0.2)
    runs = [two_flows(params, ecn, 10e6, 4154, 0.8, 8.8, 0.0007, seed) for seed in range(10)]
    for run in runs:
        assert run.first_share == pytest.approx(0.5, abs=0.1)
        assert ecn.kmin <= float(np.median(run.queue)) <= ecn.kmax     # on the marking ramp
        assert run.link_use > 0.75                                    # measured 0.81-0.85
    # Without the increase events the cut rates never climb back: the link idles.
    frozen = dataclasses.replace(params, rate_timer=1e9, byte_counter=float("inf"))
    assert two_flows(frozen, ecn, 10e6, 4154, 0.8, 8.8, 0.0007, 0).link_use < 0.2   # measured 0.04
    with pytest.raises(ValueError, match="0 < join_s < end_s"):
        two_flows(params, ecn, 10e6, 4154, 9.0, 8.8, 0.0007, 0)


def _timeline(line: float, cnp_rows: list[tuple[float, float]], end: float) -> list[list[float]]:
    """A sender's timeline rows (t, acked, rate, retransmits, CNPs): at line rate until
    each (t, rate) of ``cnp_rows``, where one more CNP is counted and the rate is set."""
    rows = [[0.0, 0, line, 0, 0]]
    for k, (t, rate) in enumerate(cnp_rows, 1):
        rows += [[t - 1e-4, 0, rows[-1][2], 0, k - 1], [t, 0, rate, 0, k]]
    return rows + [[end, 0, rows[-1][2], 0, len(cnp_rows)]]


def test_the_cut_figures_read_alpha_back_from_the_rate():
    """`experiments.validity.runs.cut_figures` on a timeline cut exactly as DCQCN says,
    5.5 alpha timers after the flow's start: alpha's decay read back as 5 periods."""
    from experiments.validity.runs import cut_figures

    p = DcqcnParams().scaled(Scale.for_line_rate(10e6))
    line = p.line_rate
    alpha = ref.alpha_decayed(1.0, p.g, 5)
    (cut,) = cut_figures(_timeline(line, [(5.5 * p.alpha_timer, ref.cut(line, alpha))], 10.0), p)
    assert cut["alpha_periods"] == cut["alpha_periods_ref"] == 5
    assert cut["cut_ratio"] == pytest.approx(cut["cut_ratio_ref"])


def test_a_cnp_the_rate_does_not_show_gives_no_alpha_and_the_next_cut_still_reads():
    """A CNP counted in a row whose rate is not below the row before (seen once at 40 %
    host steal) has no alpha to read back: None, not a math domain error, and the next
    cut is read against the model's alpha from there."""
    from experiments.validity.runs import cut_figures

    p = DcqcnParams().scaled(Scale.for_line_rate(10e6))
    line = p.line_rate
    t1, t2 = 5.5 * p.alpha_timer, 20.5 * p.alpha_timer
    alpha = ref.alpha_decayed(ref.alpha_after_cnp(ref.alpha_decayed(1.0, p.g, 5), p.g), p.g, 15)
    missed, seen = cut_figures(_timeline(line, [(t1, line), (t2, ref.cut(line, alpha))], 10.0), p)
    assert missed["alpha_periods"] is None and missed["cut_ratio"] == 1.0
    assert seen["alpha_periods"] == seen["alpha_periods_ref"] == 15
