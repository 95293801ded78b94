"""A short demo end to end (root, Mininet): two configurations, one iteration of the
default trace at a quarter of its sizes, on the default fabric. The summary has every
number the issue lists for each configuration, the numbers are consistent with each
other, and the plots and per-run files are where the docs say."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

from experiments.__main__ import main  # noqa: E402
from experiments.summary import REQUIRED  # noqa: E402
from insight.report import configs_table  # noqa: E402
from insight.runfiles import read_experiment_summary, read_json_lines  # noqa: E402


@pytest.mark.timeout(150)
def test_short_demo_writes_a_consistent_summary(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    assert main(["--configs", "stock,gor", "--repeats", "1", "--iterations", "1",
                 "--size-scale", "0.25", "--seed", "3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    configs = summary["configs"]
    assert list(configs) == ["stock", "gor"]
    for name, row in configs.items():
        assert set(REQUIRED) <= set(row), name
        assert row["iteration_s"] > summary["compute_s"]
        assert 0 < row["busbw_frac"] <= 1.0
        assert 0 <= row["mean_link_util"] <= row["max_link_util"] <= 1.05
        assert all(0 <= v["mean_util"] <= v["max_util"] <= 1.05 for v in row["links"].values())
        assert row["links"], f"{name}: no leaf-spine link carried traffic"
        for key in ("ecn_marks", "cnps", "drops", "gor_moves"):
            assert isinstance(row[key], int), (name, key)
        # A receiver answers a CE-marked frame with at most one CNP: no sender saw more.
        assert row["cnps"] <= row["ecn_marks"], (name, row["cnps"], row["ecn_marks"])
        # A move is a `moved` event in GOR's log; a run without GOR has no log and none.
        events = out / name / "rep1" / "gor-events.jsonl"
        moved = [e for e in read_json_lines(events) if e["event"] == "moved"] if events.exists() else []
        assert row["gor_moves"] == len(moved), name
        assert row["model_busbw_frac"] <= 1.0
        # A collision is a flow beyond what a link carries at full pace (scale.model.excess,
        # at least one QP's worth): none unless some link carries more than one flow.
        assert row["collisions"] == 0 or row["max_flows_per_link"] > 1, (name, row["collisions"], row["max_flows_per_link"])
        assert row["iteration_s_spread"]["n"] == 1 and len(row["repeats"]) == 1
        log = read_json_lines(out / name / "rep1" / "telemetry.jsonl")   # insight's log format
        assert log and all(isinstance(r["ts"], float) and r["links"] for r in log)
        assert all("queue_depth" in v and 0 <= v["util"] for r in log for v in r["links"].values())
        assert name in printed
    assert configs["stock"]["gor_moves"] == 0 and configs["stock"]["gor_loop_s"] is None
    assert (out / "gor" / "rep1" / "gor-events.jsonl").is_file()
    # GOR runs with the agents' run directory: it publishes its topology where they read it.
    assert (out / "gor" / "rep1" / "gor-topology.json").is_file()
    assert not (out / "stock" / "rep1" / "gor-events.jsonl").exists()
    # The hash model's view: the hostfile order with random ports collides; orthogonal
    # ports only in the pipeline sends (one message each: one QP of the same index per
    # pair, stacked on a spine -- scale.messages), which GOR's plan undoes. The model
    # then pays only headers and pipeline fill (below 1), stock its collisions too.
    assert 0 < configs["gor"]["collisions"] < configs["stock"]["collisions"]
    assert configs["gor"]["model_gor_moves"] > 0 and configs["gor"]["model_busbw_frac"] < 1.0
    assert configs["stock"]["model_busbw_frac"] < configs["gor"]["model_busbw_frac"]
    # Every run carries the switches' fidelity, and the table shows it.
    assert all("faithful" in r["fidelity"] for c in configs.values() for r in c["repeats"])
    assert (out / "report.html").stat().st_size > 10000       # the page the run ends with
    for plot in ("busbw.png", "link_util_stock.png", "link_util_gor.png"):
        assert (out / "plots" / plot).stat().st_size > 1000, plot
    assert "stock" in configs_table(read_experiment_summary(out / "summary.json"))
    assert (out / "fabric.yaml").is_file() and (out / "trace.yaml").is_file()
