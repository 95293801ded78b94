"""Start-up time of the default fabric, as `make run` does it (``fabric_startup_s``):
from launching ``python -m testbed.run`` to its "ready" line -- imports, (cached)
compile, Mininet build, switch processes up, hosts configured, every switch programmed.
And the dilation `dilation: auto` gives the default fabric here (``fabric_dilation_auto``,
`topo.dilation`: goal <= 1.5), with the engines it runs (native switches and NICs where
they build).

Runs the default spec with its own node prefix and gRPC ports, so that a `make run`
on the same machine is left alone; needs root (Mininet).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from topo.processes import stop_process

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "topo" / "fabrics" / "default.yaml"
READY_TIMEOUT_S = 120


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


def run() -> dict[str, float]:
    if os.geteuid() != 0:
        raise RuntimeError("bench_fabric needs root (Mininet)")
    spec = yaml.safe_load(DEFAULT.read_text())
    spec.update(node_prefix="bn", grpc_port_base=random.Random(os.getpid()).randrange(20000, 40000))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(yaml.safe_dump(spec))
        _startup_once(path)  # warm-up: compiles the pipeline once, fills caches
        return {"fabric_startup_s": _startup_once(path), "fabric_dilation_auto": dilation_auto()}


def dilation_auto() -> float:
    """What ``dilation: auto`` gives the default fabric on this machine now."""
    from topo.dilation import dilation_for
    from topo.spec import load_spec

    return dilation_for(load_spec(DEFAULT))
