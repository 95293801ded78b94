"""The cable-failure scenario end to end (root, Mininet): the job's busiest leaf-spine
cable goes down mid-job for 2 s. Without GOR the flows on it stall until it is back;
with GOR the routes are repaired within a second and the job barely notices."""

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


@pytest.mark.timeout(150)
def test_gor_repairs_a_failed_cable_that_stalls_the_job_without_it(tmp_path: Path) -> None:
    out = tmp_path / "failure"
    summary = run_failure(Settings(repeats=1, iterations=14, size_scale=0.5, out=out),
                          fail_after_s=3.0, down_s=DOWN_S)
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
