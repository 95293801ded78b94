"""The MoE scenario: its runs' traces and jobs, its numbers and table (pure), and a
short run of the spread all-to-all without and with PXN plus the TP split on the
default fabric in Mininet (root)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from experiments import moe as M
from experiments.runner import Settings
from tccl.trace import load_trace
from topo.spec import at_link_rate, load_spec

ROOT = Path(__file__).resolve().parent.parent
FABRIC = ROOT / "topo" / "fabrics" / "default.yaml"


def test_runs_change_only_what_they_name(tmp_path):
    base = load_trace(M.MOE_TRACE)
    assert M.run_trace(base, M.RUNS["ep-rail"]) == base
    spread = M.run_trace(base, M.RUNS["ep-spread"])
    assert spread.ep.layout == "spread" and all(s.ep == spread.ep for s in spread.steps if s.op)
    hot = M.run_trace(base, M.RUNS["hot-expert"])
    assert {s.weights for s in hot.steps if s.op} == {(8.0, 1.0, 1.0, 1.0)}
    tp = load_trace(M.TP_TRACE)
    assert M.run_trace(tp, M.RUNS["tp-split"]) == tp
    jobs = {name: M.run_job(FABRIC, M.TP_TRACE if r.trace == "tp" else M.MOE_TRACE, r, 1)
            for name, r in M.RUNS.items()}
    assert jobs["ep-spread-pxn"].transport.pxn and not jobs["ep-spread"].transport.pxn
    assert jobs["tp-roce"].transport.nvlink_gbps == 0 and jobs["tp-split"].transport.tp_split
    assert jobs["tp-nvlink"].transport.nvlink_latency_us == M.TP_NVLINK_LATENCY_US
    # The TP runs' NVLink is twice a NIC, whatever the fabric's rate.
    assert jobs["tp-nvlink"].transport.nvlink_gbps * 1000 == pytest.approx(2 * load_spec(FABRIC).links.host_mbps)
    fast = tmp_path / "fast.yaml"
    fast.write_text(yaml.safe_dump(at_link_rate(yaml.safe_load(FABRIC.read_text()), 20)))
    assert M.run_job(fast, M.TP_TRACE, M.RUNS["tp-nvlink"], 1).transport.nvlink_gbps == pytest.approx(0.04)
    assert all(j.workload.check for j in jobs.values())
    with pytest.raises(ValueError, match="unknown MoE run"):
        M.parse_runs("ep-rail,fast")


def test_bus_bits_follow_nccl_tests_and_the_hot_destination():
    base = load_trace(M.MOE_TRACE)
    job = M.run_job(FABRIC, M.MOE_TRACE, M.RUNS["ep-rail"], 1)
    # Two all-to-alls of 64 KiB over 4 ranks: (n-1)/n x size x 8 each.
    assert M.bus_bits(base, job) == pytest.approx(2 * 3 / 4 * 65536 * 8)
    hot = M.run_trace(base, M.RUNS["hot-expert"])
    # Skewed: the hot rank takes 8/11 of every sender's buffer from 3 senders.
    assert M.bus_bits(hot, job) == pytest.approx(2 * 3 * 8 / 11 * 65536 * 8)


def test_table_and_verdicts():
    row = {"iteration_s": 0.5, "busbw_mbps": 8.0, "nvlink_bytes": 2048, "leaf_bytes": 1024, "spine_bytes": 4096,
           "ecn_marks": 3, "cnps": 2, "nic_pauses": 1, "drops": 0, "gor_moves": 0, "wrong": 0,
           "fidelity": {"faithful": True, "dilation": 4.5, "unfaithful_repeats": 0, "repeats": 1}}
    configs = {"ep-spread": row, "ep-spread-pxn": dict(row, spine_bytes=1024),
               "tp-nvlink": dict(row, busbw_mbps=10.0), "tp-roce": dict(row, busbw_mbps=6.0),
               "tp-split": dict(row, busbw_mbps=12.0, tp_nvlink_share=[1.0, 0.66])}
    v = M.verdicts(configs)
    assert v == {"pxn spine bytes / stock": 0.25, "tp-split busbw / max(nvlink, roce)": 1.2}
    table = M.format_moe_table(configs)
    assert "ok (4.5)" in table and "pxn spine bytes / stock: 0.25" in table and "1.0 0.66" in table


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None, reason="needs root and Mininet")
def test_short_moe_scenario_on_the_fabric(tmp_path):
    """Spread EP without and with PXN, and the TP split, one short iteration each:
    right results everywhere, PXN's spine bytes below the stock path's."""
    settings = Settings(fabric=FABRIC, repeats=1, out=tmp_path / "moe", iterations=1, size_scale=0.25,
                        timeout_s=200)
    summary = M.run_moe(settings, M.parse_runs("ep-spread,ep-spread-pxn,tp-split"))
    configs = summary["configs"]
    assert all(configs[n]["wrong"] == 0 for n in ("ep-spread", "ep-spread-pxn", "tp-split"))
    assert configs["ep-spread-pxn"]["spine_bytes"] < configs["ep-spread"]["spine_bytes"]
    assert configs["ep-spread-pxn"]["nvlink_bytes"] > configs["ep-spread"]["nvlink_bytes"]
    assert configs["tp-split"]["leaf_bytes"] + configs["tp-split"]["spine_bytes"] > 0
    assert summary["verdicts"]["pxn spine bytes / stock"] < 1
