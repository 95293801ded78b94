"""The device admits frames in the order they arrived, not the order it reads them.

Emulated time is stepped by hand and the device has no interfaces: frames enter as the
loop's ring reads would give them (per-port batches with kernel arrival times) and the
congested egress is the CPU port, whose PacketIn handler records what leaves. A queue
of depth 1 holds Y, due to leave at 1000 us; P arrives at 990 us, Q at 1010 us. A FIFO
on a wire drops P (Y is still there) and admits Q (Y has left) -- whichever port each
came by and however late the loop handles the batch.
"""

from __future__ import annotations

import pytest

from p4sim.switch.device import Device, in_arrival_order
from standin import Job

EGRESS = 3                  # the congested port (the device's CPU port)
RATE = 100_000              # bytes/s: a 100-byte frame takes 1000 us
SIZE = 100


class SteppedClock:
    """Emulated time that moves only when the test says so."""

    dilation = 1.0

    def __init__(self) -> None:
        self.us = 0

    def now_us(self) -> int:
        return self.us


class ToEgress:
    """Stand-in pipeline: every frame to EGRESS, its first byte (the tag) recorded with
    the queue depth it met at enqueue."""

    def __init__(self) -> None:
        self.enq_qdepth: dict[str, int] = {}

    def run_ingress(self, port: int, data: bytes) -> list[Job]:
        return [Job(EGRESS, 0, data)]

    def run_egress(self, job: Job, enq_qdepth: int, deq_qdepth: int, enq_timestamp: int,
                   deq_timedelta: int) -> tuple[list[tuple[int, bytes]], list[Job]]:
        self.enq_qdepth[job.data[:1].decode()] = enq_qdepth
        return [(job.port, job.data)], []


def frame(tag: str) -> bytes:
    return tag.encode() + bytes(SIZE - 1)


@pytest.fixture
def switch():
    clock = SteppedClock()
    device = Device({}, cpu_port=EGRESS, clock=clock)
    sent: list[str] = []
    device.packet_in_handler = lambda data: sent.append(data[:1].decode())
    engine = ToEgress()
    device.install(engine)
    device.tm.set_port_rate(EGRESS, RATE)
    yield device, clock, engine, sent
    device.close()


def arrive(device: Device, clock: SteppedClock, at_us: int, batches: dict[int, list]) -> None:
    """One wake-up at ``at_us`` that read ``batches`` (port -> [(arrival, tag)]) from
    the rings, in port-number order."""
    clock.us = at_us
    device._handle(in_arrival_order(
        [[(t, port, frame(tag), False) for t, tag in batches[port]] for port in sorted(batches)]))


def fill(device: Device, clock: SteppedClock, depth: int) -> None:
    """X leaves at once (the link is free until 1000 us); Y waits in the queue."""
    device.set_queue_depth(EGRESS, depth)
    arrive(device, clock, 0, {1: [(0, "X")]})
    arrive(device, clock, 10, {1: [(10, "Y")]})


@pytest.mark.parametrize("phase_us", [1010, 1500, 1900])
@pytest.mark.parametrize("early_port,late_port", [(1, 2), (2, 1)])
def test_a_full_queue_drops_what_arrived_before_a_departure_and_admits_what_came_after(
        switch, phase_us, early_port, late_port):
    device, clock, _engine, sent = switch
    fill(device, clock, depth=1)
    arrive(device, clock, phase_us, {early_port: [(990, "P")], late_port: [(1010, "Q")]})
    clock.us = 2000   # Q's turn on the link
    device.tm.service(device._transmit)
    assert sent == ["X", "Y", "Q"]
    assert device.tm.drops(EGRESS) == 1


@pytest.mark.parametrize("early_port,late_port", [(1, 2), (2, 1)])
def test_enq_qdepth_is_the_queue_at_the_arrival_instant(switch, early_port, late_port):
    device, clock, engine, sent = switch
    fill(device, clock, depth=4)
    arrive(device, clock, 1500, {early_port: [(990, "P")], late_port: [(1010, "Q")]})
    clock.us = 3000
    device.tm.service(device._transmit)
    assert sent == ["X", "Y", "P", "Q"]
    # P met Y still queued; Q met P (Y had left at 1000 us).
    assert engine.enq_qdepth == {"X": 0, "Y": 0, "P": 1, "Q": 1}


def test_frames_of_one_port_keep_their_ring_order_at_equal_times():
    batches = [[(5, 1, b"a", False), (5, 1, b"b", False)], [(3, 2, b"c", False), (5, 2, b"d", False)]]
    assert [a[2] for a in in_arrival_order(batches)] == [b"c", b"a", b"b", b"d"]
