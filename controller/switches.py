"""P4Runtime sessions with every switch of a fabric at once, usable from plain threads.

finsy does the P4Runtime work: one `finsy.Switch` per switch inside one
`finsy.Controller`, which keeps each stream open, wins primary arbitration with our
election id, reconnects after a switch restart (finsy waits up to 10 s between quick
failures) and pushes the pipeline when the switch's cookie differs. This module adds
what GOR needs on top:

* on every (re)connection as primary, the switch is *re-pushed*: its entries are
  wiped and its current program written again (`desired(name)`, which includes the
  failure repairs in force), so a restarted switch gets back exactly what it had --
  and a fabric brought up empty (`make run`) is programmed by this first push alone;
* sampled packets (PacketIns) are handed to a callback, with the switch name, and
  every push is told to another (GOR ticks at once when a dead switch is back);
* an asyncio loop on a thread of its own, so the REPL and the telemetry loop call
  `run(coro)`/`write(...)` synchronously; writes to several switches go out as one
  WriteRequest per switch, all switches concurrently.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Awaitable, Callable, Coroutine, Iterable, TypeVar

import finsy as fy
# finsy reconnects to a switch whose session failed within this many (wall) seconds of
# starting only after a 10-s throttle (its private constant: one place names it).
from finsy.switch import _FAIL_MIN_TIME_SECS as QUICK_FAILURE_S

from controller.routes import SwitchProgram, program_switch, switch_options, write_batched
from topo.addressing import AddressPlan
from topo.pipeline import Pipeline

def fresh_election_id() -> int:
    """A fresh election id: milliseconds since the epoch. P4Runtime makes the highest
    id the primary, so a controller started later takes over from an earlier one whose
    stream a switch still holds open (a crashed run), and any fixed small id
    (`controller.routes.program_fabric`'s 10, a test peeking at a switch) stays below it."""
    return int(time.time() * 1000)


# PacketIns queued per switch before finsy drops them: a few seconds of samples.
PACKET_QUEUE = 20000

T = TypeVar("T")
LOG = logging.getLogger("controller.switches")


class SwitchFleetError(RuntimeError):
    """A switch that did not come up, or a write that failed; names the switch."""


class SwitchFleet:
    """Primary P4Runtime sessions with every switch of ``plan``."""

    def __init__(self, plan: AddressPlan, pipeline: Pipeline, desired: Callable[[str], SwitchProgram],
                 on_packet: Callable[[str, Any], None] | None = None,
                 election_id: int | None = None, on_push: Callable[[str], None] | None = None) -> None:
        self.plan = plan
        self.desired = desired
        self.on_packet = on_packet
        self.on_push = on_push
        self.pushes: dict[str, int] = {sw.name: 0 for sw in plan.switches}
        # time.monotonic() of each switch's last push: its session is at least that old
        # (finsy waits 10 s to reconnect to a switch whose session failed within 2 s).
        self.pushed_at: dict[str, float] = {}
        self._ready: dict[str, threading.Event] = {sw.name: threading.Event() for sw in plan.switches}
        self.election_id = election_id or fresh_election_id()
        self.switches: dict[str, fy.Switch] = {}
        for sw in plan.switches:
            opts = switch_options(pipeline, sw)(initial_election_id=self.election_id,
                                                ready_handler=self._on_ready)
            self.switches[sw.name] = fy.Switch(sw.name, sw.grpc_address, opts)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="p4runtime", daemon=True)
        self._main: asyncio.Task | None = None   # finsy's Controller.run, on self._loop

    # --- life cycle ----------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        """Connect to every switch and wait until each has been (re)programmed."""
        self._thread.start()
        controller = fy.Controller(self.switches.values())
        self._main = asyncio.run_coroutine_threadsafe(_as_task(controller.run()), self._loop).result(timeout)
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float, names: Iterable[str] | None = None) -> None:
        """Block until the switches (all, or ``names``) are programmed primaries."""
        for name in names or self._ready:
            if not self._ready[name].wait(timeout):
                main = self._main
                if main is not None and main.done() and not main.cancelled() and main.exception():
                    raise SwitchFleetError(f"P4Runtime controller failed: {main.exception()}")
                raise SwitchFleetError(f"switch {name} at {self.plan.switch(name).grpc_address} "
                                       f"did not come up as primary within {timeout:.0f} s")

    def stop(self) -> None:
        """Close every session and end the loop thread (safe to call twice)."""
        if self._main is not None:
            # Cancel the controller's task on its loop and wait there until it has
            # unwound: cancelling the Future only would stop the loop under a task still
            # closing its sessions ("Task was destroyed but it is pending").
            main, self._main = self._main, None
            try:
                asyncio.run_coroutine_threadsafe(_cancel_and_wait(main), self._loop).result(10)
            except Exception as e:  # noqa: BLE001 -- a loop already gone: nothing left to close
                LOG.debug("closing the P4Runtime sessions: %r", e)
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> "SwitchFleet":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def is_up(self, name: str) -> bool:
        return self._ready[name].is_set() and self.switches[name].is_up

    # --- calls from other threads ----------------------------------------------------

    def run(self, coro: Awaitable[T], timeout: float = 10.0) -> T:
        """Run a coroutine on the fleet's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)  # type: ignore[arg-type]

    def write(self, updates: dict[str, list[Any]], timeout: float = 10.0) -> None:
        """One WriteRequest per switch (finsy updates: ``+e``, ``~e``, ``-e``), all
        switches at once; raises `SwitchFleetError` naming every switch that failed."""
        async def one(name: str, batch: list[Any]) -> None:
            await write_batched(self.switches[name], batch)

        async def all_of() -> list[Any]:
            names = [n for n, batch in updates.items() if batch]
            results = await asyncio.gather(*(one(n, updates[n]) for n in names), return_exceptions=True)
            return [(n, r) for n, r in zip(names, results) if isinstance(r, BaseException)]

        failed = self.run(all_of(), timeout)
        if failed:
            raise SwitchFleetError("; ".join(f"write to {n} failed: {e}" for n, e in failed))

    async def read_many(self, requests: dict[str, list[Any]]) -> dict[str, list[Any]]:
        """(On the loop) read entities from several switches concurrently; a switch
        that is down or fails answers an empty list, so one dead switch does not stall
        the telemetry of the others."""
        async def one(name: str, entities: list[Any]) -> list[Any]:
            sw = self.switches[name]
            if not sw.is_up:
                return []
            try:
                return [e async for e in sw.read(entities)]
            except Exception as e:  # noqa: BLE001 -- a switch restarting mid-read
                LOG.debug("read from %s failed: %s", name, e)
                return []

        names = list(requests)
        results = await asyncio.gather(*(one(n, requests[n]) for n in names))
        return dict(zip(names, results))

    # --- finsy callbacks (on the loop) ---------------------------------------------

    async def _on_ready(self, sw: fy.Switch) -> None:
        if not sw.is_primary:
            return
        await sw.delete_all()
        await program_switch(sw, self.desired(sw.name))
        self.pushes[sw.name] += 1
        self.pushed_at[sw.name] = time.monotonic()
        if self.on_push is not None:
            self.on_push(sw.name)
        if self.on_packet is not None:
            sw.create_task(self._packets(sw))
        self._ready[sw.name].set()

    async def _packets(self, sw: fy.Switch) -> None:
        async for packet in sw.read_packets(queue_size=PACKET_QUEUE):
            assert self.on_packet is not None
            self.on_packet(sw.name, packet)


async def _as_task(coro: Coroutine[Any, Any, Any]) -> "asyncio.Task[Any]":
    """``coro`` as a task of the running loop (so it can be cancelled and awaited there)."""
    return asyncio.ensure_future(coro)


async def _cancel_and_wait(task: "asyncio.Task[Any]") -> None:
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled() and task.exception() is not None:
        LOG.warning("the P4Runtime controller had failed: %r", task.exception())
