"""The four configurations and the job they run.

Every configuration runs the same job: the ranks of every NIC of the fabric, listed in
the order a naive hostfile gives them -- servers alternating between blocks, as
`interleaved_order` lays out -- running a trace (compute phases and
collectives), with NVLink between the ranks of a server. They differ in what the
library and the controller do with it:

========== ================ ============ =====
config     ring order       source ports GOR
========== ================ ============ =====
stock      input (hostfile) random       off
stock-gor  input (hostfile) random       on
rail       rail-aware       random       off
orthogonal rail-aware       orthogonal   off
gor        rail-aware       orthogonal   on
========== ================ ============ =====

``stock-gor`` is what GOR alone does against a stock library's collisions: the ring's
connections and QPs live for the whole job, so a collision moved away in iteration 1
stays away for iterations 2..N.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from tccl.job import Job, Transport, Workload, job_from_fabric, renumbered
from tccl.importers.registry import detect, import_trace
from tccl.trace import link_scale, load_trace, trace_document
from topo.spec import FabricSpec, load_spec

# NVLink between the ranks of a server (Gbit/s): 100x 10 Mbit/s NICs, like NVLink
# against a 400G NIC, so tensor-parallel steps never wait for the network. Stated, as the
# traces' sizes are, for NICs of tccl.trace.TRACE_LINK_MBPS; `nvlink_gbps` restates it.
NVLINK_GBPS = 1.0
# QPs per connection (NCCL_IB_QPS_PER_CONNECTION). Two, as many as the default fabric
# has spines: a ring hop can then use both uplinks of its leaf, and orthogonal ports
# spread every step's traffic over both spines -- with one QP each and one flow per
# leaf, the edge colouring gives every flow spine 0, and on p4sim that one spine's
# Python process, not any link, would set the pace.
QPS = 2


@dataclass(frozen=True)
class Config:
    """What one configuration turns on."""

    name: str
    order: str          # tccl ring order: input | rail
    ports: str          # tccl source ports: random | orthogonal
    gor: bool           # GOR's loop moves elephants


CONFIGS: dict[str, Config] = {c.name: c for c in (
    Config("stock", "input", "random", False),
    Config("stock-gor", "input", "random", True),
    Config("rail", "rail", "random", False),
    Config("orthogonal", "rail", "orthogonal", False),
    Config("gor", "rail", "orthogonal", True),
)}


def parse_configs(text: str) -> list[Config]:
    """``stock,gor`` -> those configurations, in the order given."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = CONFIGS
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"--configs: unknown configuration(s) {unknown or text!r}; "
                         f"choose from {', '.join(known)}")
    return [known[n] for n in names]


def prepare_trace(trace: str | Path, out: str | Path, iterations: int | None = None,
                  size_scale: float = 1.0, fabric: str | Path | None = None,
                  log: Callable[[str], None] = print) -> Path:
    """A copy of ``trace`` in the run directory, with its iteration count and message
    sizes changed if asked (short runs for tests: scaled sizes stay >= 1 KiB) and, given
    the ``fabric`` spec, restated for its links (`tccl.trace.link_scale`);
    validated by `tccl.trace`. A SimAI/AICB workload, AICB CSV or Chakra ET
    (`tccl.importers.registry.detect`) is imported for the ``fabric`` spec first, its
    summary logged."""
    fmt = detect(trace)
    if fmt is not None:
        if fabric is None:
            raise ValueError(f"{trace}: a {fmt} file is imported for a fabric: give its spec")
        imported = import_trace(fmt, trace, fabric)
        log(imported.summary())
        t = imported.trace
    else:
        t = load_trace(trace)
        if fabric is not None:      # sizes stated at TRACE_LINK_MBPS: restated for the fabric's links
            size_scale *= link_scale(load_spec(fabric).links.host_mbps)
    if iterations is not None and iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    if size_scale <= 0:
        raise ValueError(f"size scale must be > 0, got {size_scale}")
    if size_scale != 1.0:
        t = dataclasses.replace(t, steps=tuple(
            dataclasses.replace(s, size=max(1024, int(s.size * size_scale))) if s.op else s for s in t.steps))
    t = dataclasses.replace(t, iterations=iterations or t.iterations)
    path = Path(out)
    path.write_text(yaml.safe_dump(trace_document(t), sort_keys=False), encoding="utf-8")
    load_trace(path)
    return path


def interleaved_order(job: Job) -> list[int]:
    """Old rank numbers in a naive hostfile's order: servers alternating between blocks,
    rails snaked per server (the ring `bench.port_modes` measures, too)."""
    servers: dict[str, list] = {}
    for r in job.ranks:
        servers.setdefault(r.server, []).append(r)
    by_block: dict[int, list[str]] = {}
    for name, members in servers.items():
        by_block.setdefault(members[0].block, []).append(name)
    ordered = []
    for i in range(max(len(v) for v in by_block.values())):
        for block in sorted(by_block):
            if i < len(by_block[block]):
                ordered.append(by_block[block][i])
    order = []
    for k, name in enumerate(ordered):
        members = sorted(servers[name], key=lambda r: r.rail, reverse=bool(k % 2))
        order.extend(r.rank for r in members)
    return order


def nvlink_gbps(spec: FabricSpec, gbps: float = NVLINK_GBPS) -> float:
    """NVLink of ``gbps`` against NICs of TRACE_LINK_MBPS, for ``spec``'s NICs: the same
    multiple of their rate, so an NVLink step takes as long against the trace's compute
    as the network's steps do once their sizes are restated (`prepare_trace`)."""
    return gbps * link_scale(spec.links.host_mbps)


def hostfile_job(spec_file: str | Path, trace_file: str | Path, seed: int, emulated: bool = True) -> Job:
    """Every configuration's ranks, in a naive hostfile's order, running the trace; the
    configuration sets the rest (`configured`). ``emulated`` False for a fabric that is
    only modelled (`scale`: one job made once for all five configurations)."""
    base = job_from_fabric(spec_file, Workload(op="allreduce", trace=str(trace_file), check=False),
                           Transport(seed=seed, nvlink_gbps=nvlink_gbps(load_spec(spec_file, emulated)), qps=QPS),
                           name="experiment",
                           emulated=emulated)
    return renumbered(base, interleaved_order(base))


def configured(job: Job, config: Config) -> Job:
    """``job`` with ``config``'s ring order and source ports."""
    return dataclasses.replace(job, name=f"experiment-{config.name}",
                               workload=dataclasses.replace(job.workload, order=config.order),
                               transport=dataclasses.replace(job.transport, ports=config.ports))


def build_job(spec_file: str | Path, trace_file: str | Path, config: Config, seed: int) -> Job:
    """The experiment's job under ``config`` (see the module doc)."""
    return configured(hostfile_job(spec_file, trace_file, seed), config)
