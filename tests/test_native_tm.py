"""The native traffic manager (p4sim/switch/native/tm.c) against traffic_manager.py, the
reference: the same random sequences of enqueues, services, PAUSEs and reconfigurations
at explicit emulated times, and every answer compared -- admissions, dequeues with their
metadata, PAUSE frames sent, deadlines, logs, stats, lateness histograms, bursts."""

from __future__ import annotations

import logging
import random

import pytest

from p4sim.switch.native.libswitch import SOURCES, NativeBuildError, compile_library
from p4sim.switch.native.tm import NativeTrafficManager
from p4sim.switch.pause import MAX_QUANTA
from p4sim.switch.pfc import PfcConfig
from p4sim.switch.traffic_manager import CATCHUP_US, Dequeued, TrafficManager

PORTS = (0, 1, 2, 3, 5)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


class Transcript(logging.Handler):
    """Everything a traffic manager did and said, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(("log", record.levelname, record.getMessage()))


def random_pfc(rng: random.Random, priorities: int) -> PfcConfig:
    lossless = frozenset(rng.sample(range(priorities), rng.randint(1, min(2, priorities))))
    xoff = rng.choice((800, 3000, 9000))
    # Round thresholds and times, so that sums of frame sizes and clock steps land on
    # them exactly and the comparisons' edges (<= against <) are tested too.
    return PfcConfig(lossless, xoff=xoff, xon=rng.choice((0, 500, xoff // 2, rng.randrange(0, xoff))),
                     headroom=rng.choice((0, 1500, 6000)),
                     watchdog_us=rng.choice((0.0, 0.0, 10_000.0, 150_000.0)))


def play(make, seed: int, steps: int = 500) -> list[tuple]:
    """Drive the traffic manager ``make(clock, **settings)`` builds through ``seed``'s
    random sequence; returns its transcript."""
    rng = random.Random(seed)
    clock = FakeClock()
    priorities = rng.choice((1, 2, 2, 4, 8))
    settings = {"priorities": priorities, "depth": rng.randint(1, 8),
                "queue_rate_pps": rng.choice((None, None, 2000.0)),
                "pfc": random_pfc(rng, priorities) if priorities > 1 and rng.random() < 0.8 else None}
    tm = make(clock, **settings)
    out = Transcript()
    logger = logging.getLogger("p4sim.switch.traffic_manager")
    logger.addHandler(out)
    sizes: dict[int, int] = {}
    tm.send_pause = lambda port, quanta: out.lines.append(("pause", clock.now, port, quanta))

    def transmit(d: Dequeued) -> int:
        out.lines.append(("tx", clock.now, d.port, d.priority, d.item, d.enq_timestamp,
                          d.enq_qdepth, d.deq_qdepth, d.deq_timedelta))
        if isinstance(d.item, int) and d.item % 11 == 0:   # an egress clone, queued again
            out.lines.append(("clone", tm.enqueue(PORTS[d.item % len(PORTS)], d.priority, ("clone", d.item),
                                                  size=sizes[d.item])))
        return 0 if isinstance(d.item, int) and d.item % 13 == 0 else sizes.get(d.item, 64)

    try:
        for port in PORTS:
            tm.add_port(port)
            tm.set_port_rate(port, rng.choice((None, 125_000.0, 1_250_000.0, 12_500_000.0)))
            tm.set_frame_bytes(port, rng.choice((1518, 4114)))
        for item in range(steps):
            op = rng.random()
            if op < 0.45:
                port = rng.choice(PORTS)
                priority = rng.randrange(priorities + (1 if rng.random() < 0.05 else 0))
                sizes[item] = rng.choice((100, 500, 1000, rng.randint(60, 1500)))
                arrival = clock.now - rng.choice((0, 5, 300, 4000)) if rng.random() < 0.7 else None
                in_port = rng.choice(PORTS) if rng.random() < 0.9 else None
                out.lines.append(("enq", item, tm.enqueue(port, priority, item, arrival, sizes[item], in_port)))
            elif op < 0.65:
                clock.now += rng.choice((0, 1, 37, 500, 5_000, 5_000, 10_000, 40_000, int(CATCHUP_US) + 1_000))
            elif op < 0.8:
                deadline = tm.next_deadline()
                out.lines.append(("deadline", deadline))
                if deadline is not None:
                    clock.now = max(clock.now, deadline)
                tm.service(transmit)
            elif op < 0.85:
                tm.service(transmit, until=clock.now - rng.choice((0, 40, 2_000)) if rng.random() < 0.6 else None)
            elif op < 0.92:
                quanta = {p: rng.choice((0, 1, 200, MAX_QUANTA)) for p in rng.sample(range(8), rng.randint(1, 3))}
                arrival = clock.now - rng.choice((0, 50)) if rng.random() < 0.5 else None
                tm.receive_pause(rng.choice(PORTS), quanta, arrival)
            elif op < 0.94:
                tm.set_port_rate(rng.choice(PORTS), rng.choice((None, 250_000.0, 1_250_000.0)))
            elif op < 0.95:
                tm.set_queue_rate(rng.choice((None, *PORTS)), rng.choice((None, 500.0, 5000.0)))
            elif op < 0.96:
                tm.set_queue_depth(rng.choice((None, *PORTS)), rng.randint(1, 6))
            elif op < 0.97:
                tm.set_frame_bytes(rng.choice(PORTS), rng.choice((64, 1518, 9018)))
            elif op < 0.975 and priorities > 1:
                tm.set_pfc(random_pfc(rng, priorities) if rng.random() < 0.7 else None)
            else:
                hist, bursts, packet_time = tm.fidelity()
                out.lines.append(("stats", tm.stats(), hist.to_json(), bursts, packet_time,
                                  tm.backlog(), [tm.drops(p) for p in PORTS]))
        # Drain what is left, deadline by deadline (an XOFF that never ends refreshes
        # for ever: a bounded number of rounds).
        for _ in range(steps):
            deadline = tm.next_deadline()
            out.lines.append(("deadline", deadline))
            if deadline is None:
                break
            clock.now = max(clock.now, deadline)
            tm.service(transmit)
        hist, bursts, packet_time = tm.fidelity()
        out.lines.append(("end", tm.stats(), hist.to_json(), bursts, packet_time, tm.backlog()))
    finally:
        logger.removeHandler(out)
    return out.lines


@pytest.mark.parametrize("seed", range(60))
def test_native_tm_does_what_the_python_one_does(seed):
    python = play(TrafficManager, seed)
    native = play(NativeTrafficManager, seed)
    kinds = {line[0] for line in python}
    assert {"enq", "tx"} <= kinds   # the sequence exercised the queues
    for i, (a, b) in enumerate(zip(python, native)):
        assert a == b, f"seed {seed}: first difference at step {i} of {len(python)}"
    assert len(python) == len(native)


def test_the_sequences_cover_pfc_and_the_watchdog():
    """The random sequences reach what the comparison is for: PAUSE frames out, pauses
    received, headroom drops, a pause storm, the CATCHUP limit."""
    seen = {"pause_out": 0, "storms": 0, "headroom_drops": 0, "pause_rx": 0, "drops": 0, "bursts": 0}
    for seed in range(60):
        lines = play(TrafficManager, seed)
        seen["pause_out"] += sum(1 for line in lines if line[0] == "pause")
        end = lines[-1][1]
        for s in end.values():
            seen["storms"] += s["pfc"]["storms"]
            seen["headroom_drops"] += s["pfc"]["headroom_drops"]
            seen["pause_rx"] += sum(s["pfc"]["pause_rx"])
            seen["drops"] += s["drops"]
            seen["bursts"] += s["bursts"]
    assert all(seen.values()), seen


def test_a_callback_error_is_raised_after_the_call():
    clock = FakeClock()
    tm = NativeTrafficManager(clock)
    tm.enqueue(1, 0, "x")

    def transmit(d: Dequeued) -> int:
        raise RuntimeError("egress failed")

    with pytest.raises(RuntimeError, match="egress failed"):
        tm.service(transmit)
    assert tm.backlog() == 0


def test_bad_settings_are_refused_with_what_is_wrong():
    with pytest.raises(ValueError, match="1..8"):
        NativeTrafficManager(FakeClock(), priorities=9)
    tm = NativeTrafficManager(FakeClock(), priorities=2)
    with pytest.raises(ValueError, match="0..511"):
        tm.enqueue(512, 0, "x")
    with pytest.raises(ValueError, match="needs --priority-queues 4"):
        tm.set_pfc(PfcConfig(frozenset({3}), 100, 50, 0))


def test_the_library_is_compiled_once_and_a_broken_flag_is_reported():
    assert compile_library("switch", SOURCES) == compile_library("switch", SOURCES)
    with pytest.raises(NativeBuildError, match="compiling switch failed"):
        compile_library("switch", SOURCES, ("-fno-such-flag",))
