"""The fabric against published models (issue 26, docs/validation.md), each on a small
fabric in Mininet (root): p4sim switches, real agents. Margins are stated from the
measured runs in docs/validation.md; each fabric is always torn down.

* One CNP (DCQCN, SIGCOMM 2015, section 3): each cut is alpha / 2 deep with alpha as
  its decay law says, and fast recovery halves the gap to the target every rate timer
  (fails with the increase stages removed: the rate stays cut).
* PFC is per ingress port (same paper, section 2): with PFC alone the lone flow gets
  1/2 and the three flows sharing an ingress port 1/6 each (fails with PFC off: every
  flow's window fits the queue, 1/4 each); with DCQCN 1/4 each, and far fewer PAUSEs.
* Victim flow (same section): a flow sharing the incast's upstream links but bound to an
  idle egress is paused with the incast under PFC alone (fails with PFC off: nothing
  pauses it) and keeps at least near its max-min share with DCQCN (fails without
  DCQCN's marking: PFC alone's 0.20-0.22; and with the increase stages removed: the
  cut senders stay at the rate floor and the job never finishes).
* Two flows, one bottleneck (section 4's fluid model): the second flow's join is fair
  within a few windows, both flows near half the link after, the queue held by the
  marking ramp, the link used (fails with switches that never mark: the windows hold
  a queue above Kmax; and with the increase stages removed: the flows' rates only
  fall and the job does not finish).
* The profiles (issue 26's check 5): a 3-to-1 incast under the testbed's, the paper's
  and HPCC's production DCQCN set, each with its scaled marking: every one marks and
  cuts without a drop, and the published sets, marking earlier, leave PFC a fraction
  of the testbed set's PAUSE frames.

The PFC and victim checks run on one fabric of PFC_FABRIC's shape (`pfc_fabric`, module
scope): each run counts drops and PAUSE frames as its own deltas and ends with its job,
so the four runs on it are the same as two per fabric, less a bring-up and teardown.
They come last, so that no other check's fabric runs beside it while it is up.

A run the host's hypervisor stole from is measured again, once, on a fabric of the
check's shape dilated to cover the stalls it met (`measured`, docs/fabric.md).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

from controller.routes import program_fabric  # noqa: E402
from experiments.validity.runs import (ONE_CNP_FABRIC, PFC_FABRIC, PROFILES_FABRIC,  # noqa: E402
                                       TWO_FLOWS_FABRIC, check_spec, one_cnp, pfc_ingress, profiles,
                                       two_flows, victim)
from testkit import again_if_stolen  # noqa: E402
from topo.net import Fabric  # noqa: E402
from topo.spec import parse_spec  # noqa: E402

T = TypeVar("T")


@pytest.fixture(scope="module")
def pfc_fabric(tmp_path_factory) -> Iterator[tuple[Fabric, Path]]:
    """The PFC and victim checks' fabric and its spec file (the module docstring says why one)."""
    tmp = tmp_path_factory.mktemp("pfc-fabric")
    spec, spec_file = check_spec(PFC_FABRIC, f"v{os.getpid() % 1000}", tmp)
    with Fabric(spec, run_dir=tmp / "run", program=program_fabric) as fab:
        yield fab, spec_file


def on_fabric(shape: Mapping[str, Any], out: Path, check: Callable[[Fabric, Path, Path], T],
              dilation: float | None = None) -> T:
    """``check(fabric, spec_file, run_dir)`` on a fabric of ``shape`` of its own, at
    ``dilation`` when given, torn down after."""
    prefix = "u" if dilation is None else "z"
    spec, spec_file = check_spec({**shape, "dilation": dilation or shape["dilation"]},
                                 f"{prefix}{os.getpid() % 1000}", out)
    with Fabric(spec, run_dir=out / "run", program=program_fabric) as fab:
        return check(fab, spec_file, out / "job")


def measured(shape: Mapping[str, Any], out: Path, check: Callable[[Fabric, Path, Path], T],
             runs: Callable[[T], Iterable[Mapping[str, Any]]] = lambda r: [r],
             fabric: tuple[Fabric, Path] | None = None) -> T:
    """``check`` on ``fabric`` (or a fabric of ``shape`` of its own), measured again on
    one of ``shape`` dilated to cover the stalls a stolen run met (`testkit.again_if_stolen`)."""
    first = ((lambda: check(*fabric, out / "job")) if fabric is not None
             else (lambda: on_fabric(shape, out, check)))
    return again_if_stolen(first, runs, dilated=lambda d: on_fabric(shape, out / "dilated", check, d))


def test_one_cnp_cuts_by_alpha_and_recovers_by_halving_the_gap(tmp_path):
    r = measured(ONE_CNP_FABRIC, tmp_path, one_cnp)
    assert r["marks"] and all(m >= 1 for m in r["marks"]), r["marks"]
    assert r["cnps"] == len(r["marks"]) == len(r["cuts"]) == 2, r    # one CNP per mark
    for cut in r["cuts"]:
        # alpha: as many alpha timers of decay as elapsed (one either way: the row's time)
        assert cut["alpha_periods"] is not None, f"no cut after the CNP: {cut}"
        assert abs(cut["alpha_periods"] - cut["alpha_periods_ref"]) <= 1, cut
        assert cut["cut_ratio"] == pytest.approx(cut["cut_ratio_ref"], abs=0.003), cut
        # Rc after each quiet rate timer, in units of the rate before the cut; measured
        # within 1e-4 of the model (docs/validation.md), stated 0.005.
        assert cut["recovery"] == pytest.approx(cut["recovery_ref"], abs=0.005), cut
        assert cut["recovery"][5] > 0.98 and cut["recovery"][0] < 0.55


def test_two_flows_share_one_bottleneck_as_the_fluid_model(tmp_path):
    r = measured(TWO_FLOWS_FABRIC, tmp_path, two_flows)
    assert r["drops"] == 0, r
    # Measured (docs/validation.md, check 2): fair in the first to fourth 200 ms window
    # after the join in 8 runs (the model: the first), the 13th (2.4 s) in one CI run
    # beside the unit tests -- a window's shares are read from ACKs of 16
    # packets, ~2 per flow and window, so "within 5 % of 1/2" is a coarse reading; stated
    # within 3 s of the ~8 s shared. A flow held at its floor or starved is never fair.
    assert r["fair_after_s"] is not None and r["fair_after_s"] <= 3.0, r
    # The first flow's share afterwards: measured 0.52-0.61 on the fabric, 0.49-0.56 in
    # a packet-level run of the agents' own rate machine (the fluid model: 0.51-0.53);
    # stated within 0.12 of 1/2 -- a flow held at its floor, or starved, fails it.
    assert r["shares_after"] == pytest.approx([0.5, 0.5], abs=0.12), r
    # The queue held by the marking ramp: median measured 10-15 packets (the model's
    # fixed point: 13.4), p95 19-22, for Kmax 20; stated median at most Kmax, p95 under
    # 1.25 Kmax. Switches that never mark leave the flows to their windows: median 25,
    # p95 26, and fail both.
    assert r["queue_p5_p50_p95"][1] <= r["kmax"], r
    assert r["queue_p5_p50_p95"][2] <= 1.25 * r["kmax"], r
    # The link used once fair: measured 0.95 of payload goodput.
    assert r["link_use"] > 0.85, r


def test_each_profile_marks_and_cuts_the_published_ones_before_pfc(tmp_path):
    table = measured(PROFILES_FABRIC, tmp_path, profiles, lambda t: t.values())
    fair_mbps = parse_spec(dict(PROFILES_FABRIC), "profiles").links.host_mbps / 3
    for name, row in table.items():
        assert row["drops"] == 0 and row["ecn_marks"] > 0 and row["cnps"] > 0, (name, row)
        # Measured slowest 1.99-3.28 Mbit/s for a fair 3.33 (docs/validation.md), and once
        # 1.34 (production, faithful, a fresh-clone CI run): its 60 ms rate timer climbs
        # back slowly from a deep cut. Stated above 0.35 of the fair share.
        assert row["busbw_mbps_min"] > 0.35 * fair_mbps, (name, row)
    # Measured PAUSE frames: testbed 98-132, paper 0-2, production 6-10.
    for name in ("paper", "production"):
        assert table[name]["pauses"] < table["testbed"]["pauses"] / 4, table


def alone_and_with_dcqcn(run: Callable[..., dict[str, Any]],
                         dcqcn_runs: int = 1) -> Callable[[Fabric, Path, Path], dict[str, Any]]:
    """A check's runs on one fabric, PFC alone once and with DCQCN ``dcqcn_runs`` times,
    as one measurement: they are compared with each other, so a stolen one is measured
    again with the others."""
    def runs(fab: Fabric, spec_file: Path, out: Path) -> dict[str, Any]:
        return {"alone": run(fab, spec_file, out / "pfc", dcqcn=False),
                "dcqcn": [run(fab, spec_file, out / f"dcqcn{i}", dcqcn=True) for i in range(dcqcn_runs)]}
    return runs


def each_run(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The runs of an `alone_and_with_dcqcn` measurement, as `again_if_stolen` reads them."""
    return [result["alone"], *result["dcqcn"]]


def test_pfc_shares_per_ingress_port_and_dcqcn_per_flow(pfc_fabric, tmp_path):
    pair = measured(PFC_FABRIC, tmp_path, alone_and_with_dcqcn(pfc_ingress), each_run, fabric=pfc_fabric)
    alone, (both,) = pair["alone"], pair["dcqcn"]
    assert alone["drops"] == 0 and alone["retransmits"] == 0 and alone["pauses"] > 0, alone
    assert alone["cnps"] == 0, alone
    # Measured 0.50-0.51 and 0.16-0.18 (docs/validation.md); PFC off gives 0.25 each.
    assert alone["shares"] == pytest.approx(alone["shares_ref"], abs=0.05), alone
    assert both["drops"] == 0 and both["cnps"] > 0, both
    # Measured 0.23-0.27 each (1.5 MB flows; 1 MB ones, converged for less of the
    # window, reached 0.30), with a tenth of the PAUSE frames.
    assert both["shares"] == pytest.approx(both["shares_ref"], abs=0.06), both
    assert both["pauses"] < alone["pauses"] / 3, pair


# Runs of the victim check with DCQCN, averaged: a run's outcome is bimodal (below).
VICTIM_DCQCN_RUNS = 3


def test_victim_flow_paused_under_pfc_alone_not_with_dcqcn(pfc_fabric, tmp_path):
    result = measured(PFC_FABRIC, tmp_path, alone_and_with_dcqcn(victim, VICTIM_DCQCN_RUNS), each_run,
                      fabric=pfc_fabric)
    alone, dcqcn = result["alone"], result["dcqcn"]
    assert alone["drops"] == 0 and alone["pauses"] > 0 and alone["cnps"] == 0, alone
    assert all(r["drops"] == 0 and r["cnps"] > 0 for r in dcqcn), dcqcn
    # Measured (docs/validation.md): the victim at 0.20-0.27 of the line under PFC alone
    # (0.274 once: the former bound of 0.28 was that close), 0.46 with PFC off: stated
    # clearly below its max-min share of 1/3, under 0.30. Paused with the incast flows on
    # its uplink, it keeps about their pace (its lead over them -0.03..+0.05).
    assert alone["victim"] < 0.30, alone
    # With DCQCN a run goes one of two ways (26 runs on the idle machine, 2026-12-08):
    # in 23 the victim got 0.35-0.51, leading those flows by 0.17-0.33; in 3 the CNPs came
    # in bursts, its alpha stayed high and its cuts deep: 0.29-0.31 (lead 0.07 where
    # read). A single run held 0.05 clear of PFC alone's failed 3 of 15 fresh-clone CI
    # runs (0.26-0.29 against 0.22-0.25). Averaged over VICTIM_DCQCN_RUNS: at least its
    # max-min share of 1/3 less 0.1, and its lead 0.05 clear of PFC alone's. Not bounded
    # above by 1/3: the two incast flows crossing leaf 0's uplink are marked at two
    # queues, and the victim takes what they leave of it.
    mean = {key: sum(r[key] for r in dcqcn) / len(dcqcn) for key in ("victim", "victim_lead", "receiver_link_use")}
    assert mean["victim"] >= dcqcn[0]["victim_ref"] - 0.1, (mean, dcqcn)
    assert mean["victim_lead"] > alone["victim_lead"] + 0.05, (mean, result)
    # The incast keeps its NIC's link busy (measured 0.70 of payload goodput).
    assert mean["receiver_link_use"] > 0.6, (mean, dcqcn)
