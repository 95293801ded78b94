"""The results table the prompt prints when a job finishes (no root): written from the
agents' results files as `tccl.results.save` writes them, one per server."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from controller.agents import JobRun
from controller.jobtable import job_table
from tccl.results import Row, save

META = {"job": "allreduce-random", "op": "allreduce", "algo": "ring", "order": "rail", "ports": "random",
        "ranks": 4}
FIDELITY = {"faithful": True, "dilation": 1.0, "kernel_drops": 0,
            "tx": {"on_time_frac": 0.99, "p99_us": 1500.0, "p99_frames": 0.45},
            "rx": {"on_time_frac": 0.99, "p99_us": 1600.0, "p99_frames": 0.5}}


def finished(tmp_path: Path, *servers: str, status: int = 0) -> JobRun:
    run = JobRun("allreduce-random", tmp_path / "job.yaml")
    for s in servers:
        run.procs[s] = subprocess.Popen(["sh", "-c", f"exit {status}"])
        run.procs[s].wait()
    return run


def test_sweep_table_takes_the_slowest_rank_and_sums_wrong_results(tmp_path: Path) -> None:
    save(tmp_path / "results-b0h0.json", {**META, "server": "b0h0", "fidelity": FIDELITY},
         [Row.measure("allreduce", 65536, 4, 0.100, 0), Row.measure("allreduce", 1 << 20, 4, 1.0, 0)])
    save(tmp_path / "results-b1h0.json", {**META, "server": "b1h0", "fidelity": FIDELITY},
         [Row.measure("allreduce", 65536, 4, 0.125, 1), Row.measure("allreduce", 1 << 20, 4, 0.9, 0)])
    table = job_table(finished(tmp_path, "b0h0", "b1h0"), tmp_path)
    lines = table.splitlines()
    assert lines[0] == "job allreduce-random finished: b0h0 exit 0, b1h0 exit 0"
    assert lines[1] == "# allreduce (ring), 4 ranks, order rail, ports random"
    assert re.match(r"#\s+size\s+count\s+type\s+redop\s+time\s+algbw\s+busbw\s+#wrong", lines[2])
    slow = Row.measure("allreduce", 65536, 4, 0.125, 1)         # b1h0's time, both agents' wrong
    assert lines[4].split() == ["65536", "65536", "uint8", "bxor", "125000.0",
                                f"{slow.algbw_mbps:.3f}", f"{slow.busbw_mbps:.3f}", "1"]
    assert lines[5].split()[4] == "1000000.0"                    # b0h0's 1 s for 1 MiB
    avg = (slow.busbw_mbps + Row.measure("allreduce", 1 << 20, 4, 1.0, 0).busbw_mbps) / 2
    assert lines[6] == f"# Avg bus bandwidth    : {avg:.3f} Mb/s"
    assert lines[7].startswith("# b0h0 fidelity (faithful, dilation 1)") and lines[8].startswith("# b1h0 ")


def test_trace_job_and_an_agent_without_results(tmp_path: Path) -> None:
    save(tmp_path / "results-b0h0.json", {**META, "op": None, "trace": "dp-tp-pp", "server": "b0h0",
                                          "iteration_s": [0.70, 0.61]}, [])
    save(tmp_path / "results-b1h0.json", {**META, "op": None, "trace": "dp-tp-pp", "server": "b1h0",
                                          "iteration_s": [0.68, 0.66]}, [])
    table = job_table(finished(tmp_path, "b0h0", "b1h0", "b2h0", status=1), tmp_path)
    assert "b2h0 exit 1" in table.splitlines()[0]
    assert f"# no results from b2h0: see {tmp_path}/agent-<server>.log" in table
    assert "# trace dp-tp-pp, 4 ranks: iteration s (slowest server) 0.700 0.660" in table
    assert "#wrong" not in table


def test_wait_started_returns_once_every_agent_is_up_or_gone(tmp_path: Path) -> None:
    """`job` at the prompt returns when the agents are set up: an agent is up once its
    ready marker is written, and one that exited before is named with its status."""
    from controller.agents import JobRunner
    from tccl.rundir import ready_path

    runner = JobRunner(fabric=None, run_dir=tmp_path)
    run = JobRun("sendrecv", tmp_path / "job.yaml")
    # b0h0 writes its marker after 0.3 s and keeps running; b1h0 fails before its marker.
    run.procs["b0h0"] = subprocess.Popen(["sh", "-c", f"sleep 0.3; touch {ready_path(tmp_path, 'b0h0')}; sleep 30"])
    run.procs["b1h0"] = subprocess.Popen(["sh", "-c", "exit 3"])
    try:
        assert runner.wait_started(run, 20) == {"b1h0": "exit 3"}
        assert ready_path(tmp_path, "b0h0").exists()
        # Still starting when the wait is over: named as such.
        run.procs["b1h1"] = subprocess.Popen(["sleep", "30"])
        assert runner.wait_started(run, 0.2) == {"b1h0": "exit 3", "b1h1": "starting"}
    finally:
        for proc in run.procs.values():
            proc.kill()
            proc.wait()
