"""An agent's control channel without NICs or root: an engine with one flow (a queue
pair created directly), its loop turning in a thread, the control server on a real Unix
socket, and a client. Shared by the control-channel tests and its fuzz test."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tccl.control import AgentClient, ControlServer, socket_path
from tccl.engine import Engine, QueuePair
from tccl.job import Job, RankInfo, Transport, Workload

RANKS = (RankInfo(0, "a", 0, 0, "eth0", "10.0.0.1", "02:00:00:00:00:01", "02:ff:00:00:00:01"),
         RankInfo(1, "b", 1, 0, "eth0", "10.0.1.1", "02:00:00:00:00:02", "02:ff:00:00:00:02"))


@contextmanager
def serving_agent(run_dir: Path, loop_s: float = 60.0, nic: str = "python"
                  ) -> Iterator[tuple[Engine, QueuePair, AgentClient]]:
    """Agent "a" serving in ``run_dir`` for at most ``loop_s`` (engine on transport
    ``nic``, its flow, a client); everything is stopped when the block ends."""
    engine = Engine(Job(ranks=RANKS, transport=Transport(), workload=Workload()), "a", nic=nic)
    qp = QueuePair(engine, RANKS[0], RANKS[1], 50000, engine.clock())
    engine.qps[qp.qpn] = qp
    server = ControlServer(engine, socket_path(run_dir, "a")).start()
    stop = threading.Event()
    loop = threading.Thread(target=lambda: engine.run_until(stop.is_set, loop_s), daemon=True)
    loop.start()
    client = AgentClient(socket_path(run_dir, "a"), timeout=5)
    try:
        yield engine, qp, client
    finally:
        client.close()
        engine.call(stop.set)           # the loop sleeps until something wakes it
        loop.join(5)
        server.stop()
        engine.close()
