"""Digest delivery: the engine's digest messages -> DigestList stream messages.

Follows the P4Runtime DigestEntry.Config semantics (as BMv2's learning engine does):
only digests with a config are delivered; messages are batched into one DigestList
until ``max_list_size`` messages (0: no size limit) or ``max_timeout_ns`` since the
first (0: send at once); a message equal to one in a list not yet acknowledged is
suppressed until that list is acked (DigestListAck) or ``ack_timeout_ns`` passes
(0: no suppression).

The engine only queues digests. The server's collect function drains them into a
`DigestBatcher`; the `DigestPump` thread calls it every ``POLL_S`` (or sooner, at the
batcher's next deadline or on `wake`) while the pipeline declares digests.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from p4sim.proto import p4r
from p4sim.runtime import codec
from p4sim.runtime.schema import DigestInfo

POLL_S = 0.005  # digest latency bound without a wake(); 200 cheap polls/s at most


@dataclass
class _Batch:
    messages: list[tuple[int, ...]] = field(default_factory=list)
    started_ns: int = 0


@dataclass
class _Unacked:
    messages: set[tuple[int, ...]]
    sent_ns: int


class DigestBatcher:
    """Batching and ack suppression for one pipeline; no threads, no engine (testable)."""

    def __init__(self, deliver: Callable[[p4r.DigestList], None]):
        self._deliver = deliver
        self._batches: dict[int, _Batch] = {}
        self._unacked: dict[tuple[int, int], _Unacked] = {}
        self._next_list_id: dict[int, int] = {}

    def add(self, info: DigestInfo, cfg: p4r.DigestEntry.Config, values: tuple[int, ...], now_ns: int) -> None:
        if any(values in u.messages for (did, _), u in self._unacked.items() if did == info.id):
            return
        batch = self._batches.setdefault(info.id, _Batch())
        if values in batch.messages:
            return
        if not batch.messages:
            batch.started_ns = now_ns
        batch.messages.append(values)

    def flush_due(self, digests: dict[int, tuple[DigestInfo, p4r.DigestEntry.Config]], now_ns: int) -> int | None:
        """Send full or timed-out batches, expire acks; return the next deadline (ns) or None."""
        deadline = None
        for key, unacked in list(self._unacked.items()):
            cfg = digests.get(key[0], (None, None))[1]
            if cfg is None or now_ns - unacked.sent_ns >= cfg.ack_timeout_ns:
                del self._unacked[key]
            else:
                due = unacked.sent_ns + cfg.ack_timeout_ns
                deadline = due if deadline is None else min(deadline, due)
        for did, batch in list(self._batches.items()):
            if did not in digests:
                del self._batches[did]
                continue
            info, cfg = digests[did]
            while batch.messages:
                full = cfg.max_list_size and len(batch.messages) >= cfg.max_list_size
                timed_out = now_ns - batch.started_ns >= cfg.max_timeout_ns
                if not (full or timed_out):
                    due = batch.started_ns + cfg.max_timeout_ns
                    deadline = due if deadline is None else min(deadline, due)
                    break
                take = cfg.max_list_size or len(batch.messages)
                messages, batch.messages = batch.messages[:take], batch.messages[take:]
                self._send(info, cfg, messages, now_ns)
                batch.started_ns = now_ns
        return deadline

    def _send(self, info: DigestInfo, cfg: p4r.DigestEntry.Config, messages: list[tuple[int, ...]], now_ns: int) -> None:
        list_id = self._next_list_id.get(info.id, 1)
        self._next_list_id[info.id] = list_id + 1
        if cfg.ack_timeout_ns:  # 0: no suppression, nothing to wait for
            self._unacked[(info.id, list_id)] = _Unacked(set(messages), now_ns)
        self._deliver(
            p4r.DigestList(
                digest_id=info.id,
                list_id=list_id,
                data=[codec.encode_digest_data(m, info.member_widths) for m in messages],
                timestamp=time.time_ns(),
            )
        )

    def ack(self, digest_id: int, list_id: int) -> bool:
        """Forget an acknowledged list; False if it was not outstanding."""
        return self._unacked.pop((digest_id, list_id), None) is not None


class DigestPump:
    """Background thread moving digests from the engine to the batcher and out."""

    def __init__(self, collect: Callable[[int], int | None]):
        """``collect(now_ns)`` drains the engine and flushes; returns the next deadline."""
        self._collect = collect
        self._cond = threading.Condition()
        self._active = False
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="p4rt-digests", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def set_active(self, active: bool) -> None:
        """Poll only while the pipeline has digests to deliver."""
        with self._cond:
            self._active = active
            self._cond.notify()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                if not self._active:
                    self._cond.wait()
                    continue
            deadline = self._collect(time.monotonic_ns())
            timeout = POLL_S
            if deadline is not None:
                timeout = min(timeout, max(0.0, (deadline - time.monotonic_ns()) / 1e9))
            with self._cond:
                if not self._stopping:
                    self._cond.wait(timeout)
