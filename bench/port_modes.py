"""Ring AllReduce on a fabric with random vs orthogonal source ports (for `make bench`).

The ring is the one a naive rank order gives when servers are listed alternating
between blocks (b0h0, b1h0, b0h1, b1h1, ...; rails snaked inside each server, NVLink
between a server's ranks) -- `experiments.configs.interleaved_order`, the hostfile
order of the experiments' stock configuration: every hop between servers crosses
blocks, so every leaf on the ring's rails sends ``servers_per_block`` concurrent flows
up its uplinks -- as many as there are spines on the default fabric. Random ports then
often share an uplink (each sharing flow gets half the rate, and the ring runs at its
slowest hop); orthogonal ports never do. A flat ring's busbw is bounded by the link
rate (nccl-tests' definition), so ``busbw / link rate`` (the slower of host links and
uplinks) is the fraction reported; header overhead caps it at 4096/4154 = 0.986 (RoCE
MTU 4096). The fidelity of the switches and the agents over each mode's jobs is reported beside it
(``allreduce_fidelity_p99_pkt_<mode>``, ``allreduce_faithful_<mode>``: 1 or 0).
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from emulation.fidelity import LatenessHistogram, switches_window
from experiments.configs import interleaved_order
from experiments.recorder import Recorder
from tccl.fidelity import agents_window
from tccl.job import Transport, Workload, job_from_fabric, renumbered
from tccl.launch import run_on_fabric
from topo.freeports import free_port_base

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FABRIC = ROOT / "topo" / "fabrics" / "default.yaml"
SIZES = (64 * 1024, 256 * 1024, 1024 * 1024)
SEEDS = (1, 2, 3)


def allreduce_port_modes(spec_path: Path = DEFAULT_FABRIC, sizes: tuple[int, ...] = SIZES,
                         seeds: tuple[int, ...] = SEEDS) -> dict[str, float]:
    """Start the fabric, run the ring AllReduce per port mode and seed, return figures:
    ``allreduce_busbw_frac_<mode>`` (largest size, mean over seeds) and per size."""
    from controller.routes import program_fabric
    from topo.net import Fabric
    from topo.spec import load_spec

    with tempfile.TemporaryDirectory(prefix="tccl-bench-") as tmp:
        tmp_path = Path(tmp)
        spec_file = tmp_path / "fabric.yaml"
        spec_file.write_text(own_spec(spec_path))
        spec = load_spec(spec_file)
        fabric = Fabric(spec, run_dir=tmp_path / "run", program=program_fabric)
        figures: dict[str, float] = {}
        bottleneck = min(spec.links.host_mbps, spec.links.uplink_mbps)
        fabric.start()
        recorder = Recorder(fabric.plan, clock=fabric.clock)   # its fidelity snapshots only
        try:
            for mode in ("random", "orthogonal"):
                per_size: dict[int, list[float]] = {s: [] for s in sizes}
                agents: dict[str, LatenessHistogram] = {}
                agent_drops = 0
                before = recorder.fidelity()
                for seed in seeds:
                    base = job_from_fabric(spec_file, Workload(op="allreduce", sizes=sizes, iters=2,
                                                               warmup=1, order="input", check=False),
                                           Transport(ports=mode, seed=seed, nvlink_gbps=1.0),
                                           name=f"bench-{mode}-{seed}")
                    job = renumbered(base, interleaved_order(base))
                    results = run_on_fabric(fabric, job, tmp_path / f"{mode}-{seed}", timeout=600)
                    for size in sizes:
                        per_size[size].append(_busbw(results, size) / bottleneck)
                    parts, drops = agents_window({s: r["fidelity"] for s, r in results.items()})
                    agent_drops += drops
                    for name, h in parts.items():
                        agents[name] = agents.get(name, LatenessHistogram()).merged(h)
                fidelity = switches_window(before, recorder.fidelity()).with_agents(agents, agent_drops)
                for size in sizes:
                    figures[f"allreduce_busbw_frac_{mode}_{size // 1024}K"] = statistics.mean(per_size[size])
                figures[f"allreduce_busbw_frac_{mode}"] = statistics.mean(per_size[max(sizes)])
                figures[f"allreduce_fidelity_p99_pkt_{mode}"] = fidelity.p99
                figures[f"allreduce_faithful_{mode}"] = float(fidelity.faithful)
        finally:
            recorder.close()
            fabric.stop()
    return figures


def own_spec(spec_path: Path) -> str:
    """The spec text with a node prefix and switch ports of the benchmark's own."""
    lines = [ln for ln in Path(spec_path).read_text().splitlines()
             if not ln.startswith(("grpc_port_base:", "node_prefix:", "pcap:"))]
    return "\n".join(lines + [f"grpc_port_base: {free_port_base(64)}",
                              f"node_prefix: k{os.getpid() % 1000}", "pcap: false"]) + "\n"


def _busbw(results: dict[str, Any], size: int) -> float:
    """The job's busbw at ``size``: the slowest agent's (the collective ends when it does)."""
    return min(row["busbw_mbps"] for res in results.values() for row in res["rows"] if row["size"] == size)


def port_spread(spec_path: Path = DEFAULT_FABRIC, trials: int = 200) -> dict[str, float]:
    """The share of trials in which random and orthogonal ports spread one leaf's flows
    over every uplink (`tccl.ports.perfect_spread`), and the k!/k^k random ports
    should give."""
    import math

    from tccl.ports import perfect_spread
    from topo.addressing import AddressPlan
    from topo.spec import load_spec

    plan = AddressPlan(load_spec(spec_path))
    k = plan.spec.spines
    spread = perfect_spread(plan, trials)
    return {"ports_random_perfect_frac": spread["random"],
            "ports_random_perfect_expected": math.factorial(k) / k ** k,
            "ports_orthogonal_perfect_frac": spread["orthogonal"]}
