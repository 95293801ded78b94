"""The switches' ECN marking over P4Runtime, for the checks: off on every switch
(DCQCN then never hears of congestion: "PFC alone"), back to the spec's RED ramp, or
one packet marked CE on purpose (the one-CNP check).

Each call opens its own finsy connection to the switches it writes (the fabric was
programmed by `controller.routes.program_fabric`, which disconnected) and closes it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import finsy as fy

from controller.routes import ALWAYS_MARK, ecn_steps, switch_options
from topo.addressing import SwitchInfo
from topo.spec import EcnProfile

# How long mark_one waits for the first CE mark of its entry (wall s).
MARK_TIMEOUT_S = 10.0


def _mark_all() -> Any:
    """The entry that marks every packet (any depth: the range left out) while
    mark_one holds it. (finsy's update operators change the entity: one per write.)"""
    return fy.P4TableEntry("ecn_threshold", priority=1,
                           action=fy.P4TableAction("set_mark_threshold", threshold=ALWAYS_MARK))


def _ramp(ecn: EcnProfile) -> list[Any]:
    return [fy.P4TableEntry("ecn_threshold", priority=1,
                            match=fy.P4TableMatch({"standard_metadata.enq_qdepth": (s.lo, s.hi)}),
                            action=fy.P4TableAction("set_mark_threshold", threshold=s.threshold))
            for s in ecn_steps(ecn)]


def _switch(fabric: Any, sw: SwitchInfo) -> fy.Switch:
    return fy.Switch(sw.name, sw.grpc_address, switch_options(fabric.pipeline, sw))


def set_marking(fabric: Any, ecn: EcnProfile | None) -> None:
    """The RED ramp of ``ecn`` on every switch, or no entry at all (None: no marks);
    after programming the switches hold the spec's (``fabric.spec.ecn``)."""
    async def one(sw: SwitchInfo) -> None:
        async with _switch(fabric, sw) as conn:
            held = [e async for e in conn.read(fy.P4TableEntry("ecn_threshold"))]
            if held:
                await conn.write([-e for e in held])
            if ecn is not None:
                await conn.write([+e for e in _ramp(ecn)])

    async def all_switches() -> None:
        await asyncio.gather(*(one(sw) for sw in fabric.plan.switches))

    asyncio.run(all_switches())


def marked(counters: list[Any], port: int) -> int:
    return sum(e.data.packet_count for e in counters
               if isinstance(e, fy.P4CounterEntry) and e.index == port and e.data is not None)


def mark_one(fabric: Any, switch: str, port: int) -> tuple[int, float]:
    """Mark the packets leaving ``switch`` by ``port`` CE until the first one is marked,
    then stop: (packets marked, wall seconds the marking entry was held). The switch
    must hold no other ecn_threshold entry (`set_marking` off)."""
    sw = fabric.plan.switch(switch)
    counter = fy.P4CounterEntry("ecn_marked_counter", index=port)

    async def run() -> tuple[int, float]:
        async with _switch(fabric, sw) as conn:
            before = marked([e async for e in conn.read(counter)], port)
            await conn.write([+_mark_all()])
            held = time.monotonic()
            try:
                deadline = held + MARK_TIMEOUT_S
                while marked([e async for e in conn.read(counter)], port) == before:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{switch} port {port}: no packet marked in {MARK_TIMEOUT_S:.0f} s")
            finally:
                await conn.write([-_mark_all()])
                held = time.monotonic() - held
            return marked([e async for e in conn.read(counter)], port) - before, held

    return asyncio.run(run())
