"""Start-up time of the default fabric, as `make run` does it (``fabric_startup_s``):
from launching ``python -m testbed.run`` to its "ready" line -- imports, (cached)
compile, Mininet build, switch processes up, hosts configured, every switch programmed.
And the dilation `dilation: auto` gives the default fabric here (``fabric_dilation_auto``,
`topo.dilation`: goal <= 1.5), with the engines it runs (native switches and NICs where
they build). And how long a job's agents take to start on it (``agents_startup_s``):
from launching a small AllReduce over every NIC to the last agent's start-barrier
marker (its NICs open), the median of `STARTUP_RUNS` -- what every job, demo run and
test run waits before its first frame.

And what the fabric's switches cost, native against Python in the same run: the default
fabric at dilation 1 (emulated time is wall time) once with each ``switch_engine``, a
ring AllReduce over every NIC (`bench.cpu.line_rate_job`, the native NIC's agents so
that they leave the switches the CPU), CPU seconds per second with every NIC at line
rate as a fraction of the machine, the switches' share and the agents' share apart:
``fabric_cpu_frac_at_line_rate_<engine>_switches`` (their sum),
``switches_cpu_frac_at_line_rate_<engine>``, ``agents_cpu_frac_at_line_rate_<engine>``,
and the switches' p99 departure lateness. Each engine runs as the spec's default has it
(``switch_process: auto``: native switches all in one process with one packet loop and
a member process each, Python switches a process each); ``native_own`` is native
switches a process each, as before that default. The goal is a switches' share <= 0.1
with native switches.

Runs the default spec with its own node prefix and gRPC ports, so that a `make run`
on the same machine is left alone; needs root (Mininet).
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.cpu import job_cpu, line_rate_job
from bench.port_modes import own_spec
from topo.processes import stop_process

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "topo" / "fabrics" / "default.yaml"
READY_TIMEOUT_S = 120
STARTUP_RUNS = 5
# The switches compared (topo/spec.py SWITCH_ENGINES and SWITCH_PROCESSES): each engine as
# the default runs it (auto: native switches in one shared loop), and native switches a
# process each.
SWITCH_SETUPS = (("native", "auto"), ("native", "own"), ("python", "auto"))


def _startup_once(spec_path: Path) -> float:
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "testbed.run", "--fabric", str(spec_path)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    ready = None
    lines = []
    try:
        assert proc.stdout is not None and proc.stdin is not None
        for line in proc.stdout:
            lines.append(line)
            if "ready in" in line:
                ready = time.monotonic() - started
                break
            if time.monotonic() - started > READY_TIMEOUT_S:
                break
        # End of input: the prompt exits and the launcher tears the fabric down.
        proc.communicate(input="", timeout=60)
    finally:
        # SIGTERM lets the launcher tear down its switches (SIGKILL would orphan them).
        stop_process(proc, 30)
    if ready is None:
        raise RuntimeError("fabric did not come up:\n" + "".join(lines[-20:]))
    return ready


def agents_startup_s(spec_path: Path, runs: int = STARTUP_RUNS) -> float:
    """Median seconds from launching a small AllReduce over every NIC of fabric
    ``spec_path`` to the last of its agents' start-barrier markers."""
    from controller.routes import program_fabric
    from tccl.job import Workload, job_from_fabric
    from tccl.launch import run_on_fabric
    from tccl.rundir import ready_path
    from topo.net import Fabric
    from topo.spec import load_spec

    job = job_from_fabric(spec_path, Workload(op="allreduce", sizes=(4096,), iters=1, warmup=0))
    servers = sorted({r.server for r in job.ranks})
    took = []
    with tempfile.TemporaryDirectory(prefix="bench-agents-") as tmp, \
            Fabric(load_spec(spec_path), run_dir=Path(tmp) / "run", program=program_fabric) as fabric:
        for i in range(runs):
            run_dir = Path(tmp) / f"job{i}"
            launched = time.time()
            run_on_fabric(fabric, job, run_dir)
            took.append(max(ready_path(run_dir, s).stat().st_mtime for s in servers) - launched)
    return statistics.median(took)


def cpu_at_line_rate(engine: str, process: str = "auto") -> dict[str, float]:
    """The default fabric at dilation 1 with ``engine`` switches run as ``process``
    says (`topo.spec.SWITCH_PROCESSES`), every NIC at line rate: the fractions of the
    machine its switches and its agents use (module docstring), and the switches' p99
    departure lateness and kernel drops over the whole run (the fidelity monitor's;
    lateness in packet times)."""
    import grpc

    from controller.routes import program_fabric
    from emulation.fidelity import switches_window
    from p4sim.runtime.queues import QueueControlClient, fidelity_of
    from topo.net import Fabric
    from topo.spec import load_spec

    cores = os.cpu_count() or 1
    name = engine if process == "auto" else f"{engine}_{process}"
    with tempfile.TemporaryDirectory(prefix="bench-fabric-cpu-") as tmp:
        spec_file = Path(tmp) / "fabric.yaml"
        text = "".join(ln + "\n" for ln in own_spec(DEFAULT).splitlines()
                       if not ln.startswith(("dilation:", "switch_engine:", "switch_process:")))
        spec_file.write_text(text + f"dilation: 1\nswitch_engine: {engine}\nswitch_process: {process}\n")
        with Fabric(load_spec(spec_file), run_dir=Path(tmp) / "run", program=program_fabric) as fabric:
            use = job_cpu(fabric, line_rate_job(spec_file), Path(tmp) / "job", nic="native")
            channels = [grpc.insecure_channel(f"{sw.grpc_host}:{sw.grpc_port}") for sw in fabric.net.switches]
            try:
                fidelity = switches_window({}, fidelity_of({sw.name: QueueControlClient(ch) for sw, ch
                                                            in zip(fabric.net.switches, channels)}))
            finally:
                for ch in channels:
                    ch.close()
    return {f"fabric_cpu_frac_at_line_rate_{name}_switches": use.fabric_frac_at_line_rate,
            f"switches_cpu_frac_at_line_rate_{name}": use.switches_at_line_rate / cores,
            f"agents_cpu_frac_at_line_rate_{name}": use.agents_at_line_rate / cores,
            f"fabric_load_{name}_switches": use.load,
            f"switches_wakeups_per_s_at_line_rate_{name}": use.switches_wakeups_at_line_rate,
            f"switches_p99_lateness_pkt_at_line_rate_{name}": fidelity.p99,
            f"switches_kernel_drops_at_line_rate_{name}": fidelity.kernel_drops}


def run() -> dict[str, float]:
    if os.geteuid() != 0:
        raise RuntimeError("bench_fabric needs root (Mininet)")
    spec = yaml.safe_load(DEFAULT.read_text())
    spec.update(node_prefix="bn", grpc_port_base=random.Random(os.getpid()).randrange(20000, 40000))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(yaml.safe_dump(spec))
        _startup_once(path)  # warm-up: compiles the pipeline once, fills caches
        figures = {"fabric_startup_s": _startup_once(path), "fabric_dilation_auto": dilation_auto(),
                   "agents_startup_s": agents_startup_s(path)}
    for engine, process in SWITCH_SETUPS:   # the same fabric, job and machine; only the switches differ
        figures.update(cpu_at_line_rate(engine, process))
    figures["switches_cpu_native_over_python_ratio"] = (
        figures["switches_cpu_frac_at_line_rate_native"] / figures["switches_cpu_frac_at_line_rate_python"])
    return figures


def dilation_auto() -> float:
    """What ``dilation: auto`` gives the default fabric on this machine now."""
    from topo.dilation import dilation_for
    from topo.spec import load_spec

    return dilation_for(load_spec(DEFAULT))
