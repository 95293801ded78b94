"""Wall-clock figures of one ``p4sim switch`` process between two namespaces, which
tests only assert as behaviour (`make bench` puts the speed beside the other figures):

* ``switch_port_rate_frac``: a port limited to ``RATE_MBPS``, offered 1.5 times that
  (1000-byte RoCEv2 frames from h1) with a deep queue that keeps it backlogged: the
  rate h2 receives over the last two of three seconds (its interface counter), over
  the port's rate. 1.0 is a port that keeps its rate on this machine; it falls with
  machine load. The tests check the schedule itself (tests/test_switch_device_loop.py:
  no departure earlier than the rate allows, tail drops, queue depth).
* ``switch_idle_cpu_frac``: the same process with nothing to forward, CPU seconds
  (user + system, P4Runtime server included) per wall-clock second: an idle switch
  sleeps until a frame or a timer is due (tests: the device loop's wake-ups).

Setup, program and traffic are bench_switch's (astral.p4 with a leaf's routes to
port 2); the namespaces are removed and the switch stopped by PID whatever happens.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

from bench.bench_p4rt import compiled_program, connect, p4sim_switch, start_switch, stop
from bench.bench_switch import Sender, Topology, frames, program

RATE_MBPS = 8.0
FRAME_BYTES = 1000
OVERLOAD = 1.5
OFFER_S = 3.0
WINDOW_S = (1.0, 3.0)   # seconds into the offer: the queue is full, the port backlogged
QUEUE_DEPTH = 500
IDLE_S = 2.0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _port_rate_frac(topo: Topology, workdir: Path) -> float:
    port_fps = RATE_MBPS * 1e6 / 8 / FRAME_BYTES
    offer = Sender(topo, workdir).offer    # bench_switch's paced C sender, run in h1
    sender = threading.Thread(target=offer, args=(frames(FRAME_BYTES), int(OVERLOAD * port_fps * OFFER_S),
                                                  OVERLOAD * port_fps))
    samples = []
    started = time.monotonic()
    sender.start()
    for at in WINDOW_S:
        time.sleep(max(0.0, started + at - time.monotonic()))  # the window's edges: a wall-clock figure
        samples.append((time.monotonic(), topo.rx_packets("h2")))
    sender.join()
    (t0, n0), (t1, n1) = samples
    return (n1 - n0) * FRAME_BYTES * 8 / (t1 - t0) / (RATE_MBPS * 1e6)


def run() -> dict[str, float]:
    if os.geteuid() != 0:
        raise PermissionError("bench_port_timing needs root (network namespaces, raw sockets)")
    topo = Topology()
    p4info, device_config = compiled_program()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-port-timing-") as tmp:
            workdir = Path(tmp)
            address = f"unix:{tmp}/p4rt.sock"
            command = p4sim_switch(address, workdir, "-i", f"1@{topo.ifaces['s1']}", "-i", f"2@{topo.ifaces['s2']}",
                                   "--port-rate", f"2={RATE_MBPS:g}", "--queue-depth", str(QUEUE_DEPTH))
            proc = start_switch([*topo.exec_prefix("sw"), *command], workdir)
            client = None
            try:
                client = connect(proc, address, workdir)
                client.set_pipeline(p4info, device_config)
                program(client)
                rate_frac = _port_rate_frac(topo, workdir)
                time.sleep(QUEUE_DEPTH / (RATE_MBPS * 1e6 / 8 / FRAME_BYTES))  # the queue drains
                before, started = _cpu_s(proc.pid), time.monotonic()
                time.sleep(IDLE_S)  # idleness is what is measured
                idle = (_cpu_s(proc.pid) - before) / (time.monotonic() - started)
            finally:
                if client is not None:
                    client.close()
                stop(proc)
    finally:
        topo.cleanup()
    return {"switch_port_rate_frac": rate_frac, "switch_idle_cpu_frac": idle}
