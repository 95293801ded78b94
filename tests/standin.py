"""Stand-in egress jobs for device tests that need no P4 engine: the device reads only a
job's port, priority and length (p4sim/switch/v1model.py's EgressJob)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Job:
    port: int
    priority: int
    data: bytes

    @property
    def length(self) -> int:
        return len(self.data)
