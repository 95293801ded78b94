"""The failure scenarios end to end (root, Mininet): the job's busiest leaf-spine
cable, the spine at its end, or (three-tier fabric) its busiest spine-super-spine cable
fails mid-job for 2 s. Without GOR the flows on it stall until it is back; with GOR
the routes are repaired within a second and the job barely notices."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

from experiments.failure import run_failure  # noqa: E402
from experiments.runner import Settings  # noqa: E402

DOWN_S = 2.0
# The fault 1.5 s after the agents are up (6 telemetry rounds of baseline) in a job of 10
# iterations of ~0.3 s: with GOR the job ends about when the fault does, without it the
# flows on the cable stall the job for the 2 s.
FAIL_AFTER_S = 1.5
ITERATIONS = 10


@pytest.mark.timeout(150)
def test_gor_repairs_a_failed_cable_that_stalls_the_job_without_it(tmp_path: Path) -> None:
    out = tmp_path / "failure"
    summary = run_failure(Settings(repeats=1, iterations=ITERATIONS, size_scale=0.5, out=out),
                          fail_after_s=FAIL_AFTER_S, down_s=DOWN_S)
    assert json.loads((out / "summary.json").read_text())["scenario"] == "failure"
    without, with_gor = summary["configs"]["orthogonal"], summary["configs"]["gor"]
    assert summary["cable"][0].startswith("b") and summary["cable"][1].startswith("sp")
    # Without GOR nothing reroutes: traffic stalls for about as long as the cable is down.
    assert without["repair_s"] is None
    assert without["recovery_s"] >= 0.5 * DOWN_S and without["impact_s"] >= 0.5 * DOWN_S
    # GOR sees the port go down on its next tick and reprograms the leaves.
    assert with_gor["repair_s"] is not None and 0 <= with_gor["repair_s"] < 1.5
    assert with_gor["recovery_s"] < without["recovery_s"]
    assert with_gor["impact_s"] < without["impact_s"]
    events = [json.loads(line)["event"] for line in (out / "gor" / "rep1" / "gor-events.jsonl").open()]
    assert events.index("link_down") < events.index("repaired") < events.index("link_up")


@pytest.mark.timeout(240)
def test_gor_routes_around_a_spine_killed_mid_job(tmp_path: Path) -> None:
    """The spine of the job's busiest cable killed for 2 s: GOR sees its stream break,
    routes around it within a tick and re-pushes it when it is back; without GOR the
    flows hashed onto it stall until it is back and reprogrammed."""
    out = tmp_path / "switch"
    summary = run_failure(Settings(repeats=1, iterations=ITERATIONS, size_scale=0.5, out=out),
                          fail_after_s=FAIL_AFTER_S, down_s=DOWN_S, kind="switch")
    without, with_gor = summary["configs"]["orthogonal"], summary["configs"]["gor"]
    assert summary["kind"] == "switch" and summary["switch"].startswith("sp")
    assert without["repair_s"] is None and without["recovery_s"] >= 0.5 * DOWN_S
    assert with_gor["repair_s"] is not None and 0 <= with_gor["repair_s"] < 1.5
    assert with_gor["recovery_s"] < without["recovery_s"]
    events = [json.loads(line) for line in (out / "gor" / "rep1" / "gor-events.jsonl").open()]
    names = [e["event"] for e in events]
    assert names.index("switch_down") < names.index("repaired") < names.index("switch_up")


@pytest.mark.timeout(240)
def test_gor_repairs_a_super_spine_cable_on_the_three_tier_fabric(tmp_path: Path) -> None:
    """The job's busiest spine-super-spine cable down for 2 s on the three-tier fabric:
    GOR learns it from the switches' port reports and regroups the spines."""
    from experiments.failure import THREE_TIER

    out = tmp_path / "super"
    summary = run_failure(Settings(fabric=THREE_TIER, repeats=1, iterations=ITERATIONS, size_scale=0.5, out=out),
                          fail_after_s=FAIL_AFTER_S, down_s=DOWN_S, kind="super-cable")
    without, with_gor = summary["configs"]["orthogonal"], summary["configs"]["gor"]
    assert summary["cable"][0].startswith("sp") and summary["cable"][1].startswith("ss")
    assert without["repair_s"] is None and without["recovery_s"] >= 0.5 * DOWN_S
    assert with_gor["repair_s"] is not None and 0 <= with_gor["repair_s"] < 1.5
    assert with_gor["recovery_s"] < without["recovery_s"]
    events = [json.loads(line)["event"] for line in (out / "gor" / "rep1" / "gor-events.jsonl").open()]
    assert events.index("link_down") < events.index("repaired") < events.index("link_up")
