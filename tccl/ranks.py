"""What a job file and a trace file share: the rank, the collectives, the error, and
how a file is read.

`job` (the job file) validates the trace its workload names through `trace`, and a
trace groups a job's ranks and names collectives; both build on this module, which
imports neither, so the two never need each other at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

OPS = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv")


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


def read_yaml(path: str | Path, what: str) -> Any:
    """The document in YAML file ``path`` (``what`` it holds, for the error): a
    JobError naming the file when it cannot be read or is not YAML."""
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise JobError(f"{path}: cannot read {what}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise JobError(f"{path}: not valid YAML: {e}") from e
