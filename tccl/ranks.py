"""What a job file and a trace file share: the rank, the collectives, the error.

`job` (the job file) validates the trace its workload names through `trace`, and a
trace groups a job's ranks and names collectives; both build on this module, which
imports neither, so the two never need each other at import time.
"""

from __future__ import annotations

from dataclasses import dataclass

OPS = ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")


class JobError(ValueError):
    """A job or trace file that cannot run; the message names the file and the key."""


@dataclass(frozen=True)
class RankInfo:
    """One rank: a rail NIC of a server (the "GPU" behind it)."""

    rank: int
    server: str
    block: int
    rail: int
    iface: str
    ip: str
    mac: str
    gateway_mac: str          # destination MAC of every frame this NIC sends (first hop)
