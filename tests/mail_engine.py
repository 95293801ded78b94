"""An engine for every rank of a job in one process, for collectives' logic on a
fabric's shape: messages arrive at once, one FIFO per (receiver, sender, channel),
and NVLink exists only between ranks of one server (the real engine's rule) -- so a
program that takes the wrong channel or order deadlocks or gets the wrong bytes."""

from __future__ import annotations

from collections import deque
from typing import Callable

from tccl.engine import NET, NVLINK
from tccl.job import Job


class MailEngine:
    def __init__(self, job: Job) -> None:
        self.job = job
        self.info = {r.rank: r for r in job.ranks}
        self.local = dict(self.info)
        self.boxes: dict[tuple[int, int, str], deque] = {}
        self.moves = 0

    def clock(self) -> float:
        return 0.0

    def run_for(self, seconds: float) -> None:
        """Compute phases take no time here."""

    def path(self, src: int, dst: int) -> str:
        same = self.info[src].server == self.info[dst].server
        return NVLINK if same and self.job.transport.nvlink_gbps > 0 else NET

    def send(self, src: int, dst: int, data: bytes, on_done: Callable[[], None] | None = None,
             via: str | None = None) -> None:
        via = via or self.path(src, dst)
        if via == NVLINK and self.path(src, dst) != NVLINK:
            raise ValueError(f"no NVLink between ranks {src} and {dst}")
        self.boxes.setdefault((dst, src, via), deque()).append(bytes(data))
        self.moves += 1
        if on_done is not None:
            on_done()

    def take(self, dst: int, src: int, via: str | None = None) -> bytes | None:
        box = self.boxes.get((dst, src, via or self.path(src, dst)))
        if not box:
            return None
        self.moves += 1
        return box.popleft()

    def run_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Step the programs until ``done``; False once a round moves nothing (deadlock)."""
        while True:
            before = self.moves
            if done():
                return True
            if self.moves == before:
                return False
