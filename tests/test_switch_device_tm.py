"""Traffic manager: queue depths, tail drop, token-bucket timing, priorities (fake clock)."""

from __future__ import annotations

import pytest

from p4sim.switch.traffic_manager import CATCHUP_SECONDS, Dequeued, TrafficManager


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def drain(tm: TrafficManager, clock: FakeClock, size: int = 100) -> list[tuple[int, Dequeued]]:
    """Run the TM as the device loop does: service, then jump to the next deadline."""
    out: list[tuple[int, Dequeued]] = []

    def transmit(d: Dequeued) -> int:
        out.append((clock.now, d))
        return size

    while True:
        tm.service(transmit)
        deadline = tm.next_deadline()
        if deadline is None:
            return out
        assert deadline > clock.now or tm.backlog() == 0
        clock.now = max(clock.now, deadline)


def test_queue_depth_metadata_are_true_occupancies():
    clock = FakeClock()
    tm = TrafficManager(clock)
    for i in range(3):
        assert tm.enqueue(1, 0, f"p{i}")
        clock.now += 10
    sent = drain(tm, clock)
    assert [d.item for _, d in sent] == ["p0", "p1", "p2"]
    assert [d.enq_qdepth for _, d in sent] == [0, 1, 2]
    assert [d.deq_qdepth for _, d in sent] == [2, 1, 0]
    assert [d.enq_timestamp for _, d in sent] == [1000, 1010, 1020]
    assert [d.deq_timedelta for _, d in sent] == [30, 20, 10]


def test_tail_drop_at_depth_is_counted_per_port():
    clock = FakeClock()
    tm = TrafficManager(clock, depth=4)
    results = [tm.enqueue(2, 0, i) for i in range(6)]
    assert results == [True] * 4 + [False] * 2
    assert tm.drops(2) == 2 and tm.drops(1) == 0
    tm.set_queue_depth(2, 5)
    assert tm.enqueue(2, 0, "x") and not tm.enqueue(2, 0, "y")
    assert tm.stats()[2]["drops"] == 3


def test_byte_rate_spaces_packets_at_line_rate():
    clock = FakeClock()
    tm = TrafficManager(clock)
    tm.set_port_rate(1, 10_000)  # 10 kB/s: a 100-byte packet every 10 ms
    for i in range(20):
        tm.enqueue(1, 0, i)
    sent = drain(tm, clock, size=100)
    times = [t for t, _ in sent]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(9_990 <= g <= 10_010 for g in gaps), gaps
    assert sent[-1][1].deq_timedelta == pytest.approx(19 * 10_000, abs=40)


def test_late_wakeups_are_made_up_while_backlogged():
    clock = FakeClock()
    tm = TrafficManager(clock, depth=300)
    rate = 100_000.0  # bytes/s, 1 ms per 100-byte packet
    tm.set_port_rate(1, rate)
    for i in range(300):
        tm.enqueue(1, 0, i)
    sent = 0

    def transmit(d: Dequeued) -> int:
        nonlocal sent
        sent += 1
        return 100

    start = clock.now
    lateness_us = 30_000  # the loop only gets the CPU every 30 ms
    assert lateness_us / 1e6 < CATCHUP_SECONDS
    while tm.backlog():
        tm.service(transmit)
        clock.now += lateness_us
    elapsed = (clock.now - lateness_us - start) / 1e6
    assert sent == 300
    assert sent * 100 / elapsed == pytest.approx(rate, rel=0.05)


def test_an_idle_port_does_not_burst_above_its_rate():
    clock = FakeClock()
    tm = TrafficManager(clock)
    tm.set_port_rate(1, 10_000)  # 100-byte packet every 10 ms
    clock.now += 10_000_000  # idle for 10 s
    for i in range(5):
        tm.enqueue(1, 0, i)
    times = [t for t, _ in drain(tm, clock, size=100)]
    assert times[0] == 10_001_000  # the first leaves at once...
    assert all(9_990 <= b - a <= 10_010 for a, b in zip(times, times[1:]))  # ...then line rate


def test_packet_rate_limit():
    clock = FakeClock()
    tm = TrafficManager(clock, queue_rate_pps=100)
    for i in range(5):
        tm.enqueue(3, 0, i)
    times = [t for t, _ in drain(tm, clock)]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(gaps) == 4 and all(10_000 <= g <= 10_002 for g in gaps), gaps


def test_strict_priority_highest_value_first_and_per_priority_depth():
    clock = FakeClock()
    tm = TrafficManager(clock, priorities=3)
    tm.enqueue(1, 0, "low-a")
    tm.enqueue(1, 2, "high")
    tm.enqueue(1, 0, "low-b")
    tm.enqueue(1, 1, "mid")
    sent = drain(tm, clock)
    assert [d.item for _, d in sent] == ["high", "mid", "low-a", "low-b"]
    assert [(d.priority, d.enq_qdepth) for _, d in sent] == [(2, 0), (1, 0), (0, 0), (0, 1)]


def test_priority_out_of_range_is_dropped_and_said_once(caplog):
    tm = TrafficManager(FakeClock(), priorities=2)
    with caplog.at_level("ERROR", logger="p4sim.switch.traffic_manager"):
        for _ in range(100):
            assert not tm.enqueue(1, 7, "cnp")
        assert not tm.enqueue(2, 7, "cnp")
    assert tm.drops(1) == 100 and tm.drops(2) == 1
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "port 1: priority 7 out of range" in said[0] and "--priority-queues 8" in said[0]


def test_idle_tm_has_no_deadline():
    clock = FakeClock()
    tm = TrafficManager(clock)
    tm.set_port_rate(1, 1000)
    assert tm.next_deadline() is None
    tm.enqueue(1, 0, "x")
    assert tm.next_deadline() is not None
    drain(tm, clock)
    assert tm.next_deadline() is None and tm.backlog() == 0


@pytest.mark.parametrize("kwargs", [{"priorities": 0}, {"depth": 0}, {"queue_rate_pps": -1}])
def test_bad_settings_are_rejected(kwargs):
    with pytest.raises(ValueError):
        TrafficManager(FakeClock(), **kwargs)


def test_departures_on_schedule_are_on_time_and_late_wakeups_are_seen():
    """Fidelity: a loop served at every deadline keeps the ideal link's schedule; one
    that gets the CPU only every 30 ms makes departures late and sends bursts."""
    on_time, late = FakeClock(), FakeClock()
    tms = {}
    for name, clock in (("on_time", on_time), ("late", late)):
        tm = TrafficManager(clock, depth=100)
        tm.set_port_rate(1, 100_000.0)  # 1 ms per 100-byte packet
        tm.set_frame_bytes(1, 100)      # so one packet time is 1 ms
        for i in range(100):
            tm.enqueue(1, 0, i)
        tms[name] = tm
    drain(tms["on_time"], on_time, size=100)
    while tms["late"].backlog():
        tms["late"].service(lambda d: 100)
        late.now += 30_000
    hist, bursts, packet_time = tms["on_time"].fidelity()
    assert packet_time == pytest.approx(1000)
    assert hist.total == 100 and hist.quantile(0.99) < 0.01 and bursts == 0
    hist, bursts, _ = tms["late"].fidelity()
    assert hist.total == 100
    assert 20 <= hist.quantile(0.99) <= 40   # up to 30 packet times behind schedule
    assert bursts >= 90                      # 30 frames leave together per wakeup
    stats = tms["late"].stats()[1]
    assert stats["bursts"] == bursts and sum(stats["lateness"]["counts"]) == 100


def test_a_port_without_rate_has_no_schedule_to_keep():
    clock = FakeClock()
    tm = TrafficManager(clock)
    tm.enqueue(3, 0, "x")
    drain(tm, clock)
    hist, bursts, packet_time = tm.fidelity()
    assert hist.total == 0 and bursts == 0 and packet_time is None


def test_one_late_wakeup_does_not_shift_the_schedule_of_a_short_queue():
    """Frames arriving at line rate keep at most one in the queue; when the loop once
    gets the CPU 2.5 packet times late, the frames due meanwhile leave together and the
    ones after are on the ideal link's schedule again (a bucket that forgets its credit
    whenever the queue empties would keep every later frame late)."""
    clock = FakeClock()
    tm = TrafficManager(clock, depth=100)
    tm.set_port_rate(1, 100_000.0)  # 1 ms per 100-byte packet
    tm.set_frame_bytes(1, 100)
    start = clock.now
    departures: list[int] = []

    def transmit(d: Dequeued) -> int:
        departures.append(clock.now)
        return 100

    for k in range(50):
        clock.now = start + k * 1000
        tm.enqueue(1, 0, k)
        if k == 10:
            continue                 # the loop misses frames 10 and 11...
        if k == 11:
            continue
        if k == 12:
            clock.now += 500         # ...and wakes up half a packet time into frame 12's
        tm.service(transmit)
    hist, _, _ = tm.fidelity()
    assert hist.total == 50
    late = [t - (start + k * 1000) for k, t in enumerate(departures)]
    assert late[10:12] == [2500, 1500] and late[12] == 500
    assert all(x == 0 for x in late[13:]), late[13:]
    assert hist.fraction_within(0.01) == pytest.approx(47 / 50)
