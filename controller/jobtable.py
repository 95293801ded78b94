"""A finished job's results as the prompt prints them: nccl-tests' table, from the
agents' results files (`tccl.results`), with each agent's fidelity line."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from controller.agents import JobRun
from tccl.results import HEADER, Row, format_fidelity, format_row
from tccl.rundir import results_path


def running(run: JobRun) -> bool:
    """Whether any of the job's agents is still running."""
    return any(p.poll() is None for p in run.procs.values())


def job_table(run: JobRun, agent_dir: Path) -> str:
    """A finished job as nccl-tests prints it: per size the slowest rank's time (every
    agent measured its own ranks), algbw and busbw (tccl.results), #wrong summed over
    the agents; a trace job's iteration times; each agent's fidelity line; agents that
    failed, with where their log is."""
    lines = [f"job {run.name} finished: " + ", ".join(f"{s} {st}" for s, st in run.status().items())]
    results: dict[str, dict[str, Any]] = {}
    for server in run.procs:
        path = results_path(agent_dir, server)
        if path.is_file():
            results[server] = json.loads(path.read_text(encoding="utf-8"))
    missing = sorted(set(run.procs) - set(results))
    if missing:
        lines.append(f"# no results from {', '.join(missing)}: see {agent_dir}/agent-<server>.log")
    if not results:
        return "\n".join(lines)
    first = next(iter(results.values()))
    sizes: dict[int, list[dict[str, Any]]] = {}
    for r in results.values():
        for row in r.get("rows", []):
            sizes.setdefault(row["size"], []).append(row)
    if sizes:
        lines.append(f"# {first['op']} ({first['algo']}), {first['ranks']} ranks, order {first['order']}, "
                     f"ports {first['ports']}")
        lines.append(HEADER)
        busbw = []
        for size, rows in sorted(sizes.items()):
            checked = [r["wrong"] for r in rows if r["wrong"] >= 0]
            row = Row.measure(first["op"], size, first["ranks"], max(r["time_us"] for r in rows) / 1e6,
                              sum(checked) if checked else -1)
            busbw.append(row.busbw_mbps)
            lines.append(format_row(row))
        lines.append(f"# Avg bus bandwidth    : {statistics.fmean(busbw):.3f} Mb/s")
    iterations = [r["iteration_s"] for r in results.values() if r.get("iteration_s")]
    if iterations:
        slowest = [max(its) for its in zip(*iterations)]
        lines.append(f"# trace {first.get('trace')}, {first['ranks']} ranks: iteration s (slowest server) "
                     + " ".join(f"{t:.3f}" for t in slowest))
    for server, r in sorted(results.items()):
        if r.get("fidelity"):
            lines.append(f"# {server} " + format_fidelity(r["fidelity"]).removeprefix("# "))
    return "\n".join(lines)
