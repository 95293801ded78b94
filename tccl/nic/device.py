"""One agent's native NICs: the sibling of engine.py's `NicPort` and receive path.

`NativeDevice` owns the C device (device.c) of an `Engine` opened with ``nic:
native``: the engine still opens each rank's interface ports (`InterfacePort`, IPv4 and
MAC control) and sleeps on their sockets, but every frame is read from the rings,
handled, paced and sent in C, and the library only posts messages and reaps
completions (the received messages, the acknowledged sends). The NICs' loop is in C
too (`NativeDevice.run`): the engine's thread sleeps there, in ``ppoll``, and comes back
to Python only when the library has something to do. `NativeNicPort` is a
rank's NIC as the engine, the control channel and the fidelity report see it -- the
same attributes as `NicPort`, read from the C state.

A frame for a QP the device does not know yet stops the C receive (the NICs keep
sending): the engine creates that QP (the peer's first message) or the frame is ignored
(not a QP of this job), as the Python engine decides, then the receive goes on.
"""

from __future__ import annotations

import functools
import os
import select
from typing import Any, Protocol

from emulation.clock import EmulationClock
from emulation.fidelity import LatenessHistogram
from p4sim.switch.ports import InterfacePort, close_ports
from tccl.fidelity import Lateness
from tccl.job import Job, RankInfo, qpn_index, qpn_ranks
from tccl.nic import qp as native


class QueuePair(Protocol):
    """What a NIC needs of a queue pair: its number and its two halves' C state
    (`tccl.engine.QueuePair` built from this device's classes)."""
    qpn: int
    requester: Any
    responder: Any


class Engine(Protocol):
    """What the device needs of the agent's engine (`tccl.engine.Engine`, which builds
    the device): named here so the NIC does not import the engine back."""
    ranks: dict[int, RankInfo]
    job: Job
    rx_frames: int
    rx_ignored: int

    def qp(self, local: int, peer: int, index: int = 0) -> Any: ...

ffi, lib = native.ffi, native.lib


def _lateness(c: Any, unit_s: float) -> Lateness:
    """A C lateness histogram as `tccl.fidelity.Lateness`."""
    late = Lateness(unit_s)
    late.histogram = LatenessHistogram(list(c.counts), c.max)
    late.early = c.early
    return late


class NativeNicPort:
    """One rank's NIC in the native device: its interface ports (opened here, as
    `NicPort` does) and its state in C."""

    def __init__(self, device: "NativeDevice", index: int, info: RankInfo, port: InterfacePort,
                 mac_control: InterfacePort) -> None:
        self.device, self.index, self.info = device, index, info
        self.port, self.mac_control = port, mac_control

    def add_qp(self, qp: "QueuePair") -> None:
        """Serve ``qp`` on this NIC (its requester joins the round robin)."""
        req, resp = qp.requester._c, qp.responder._c
        if lib.nic_device_add_qp(self.device.c, self.index, qp.qpn, req, resp) != 0:
            raise MemoryError(f"rank {self.info.rank}: the native NIC could not add QP {qp.qpn:#x}")
        self.device.qps += [req, resp]

    def _read(self) -> Any:
        """A snapshot of the port's C state (the NIC's thread updates it)."""
        return self.device.completions.read("nic_port", ffi.addressof(self.device.c.ports, self.index))

    @property
    def tx_lateness(self) -> Lateness:
        return _lateness(self._read().tx_lateness, self.device.frame_time)

    @property
    def rx_lateness(self) -> Lateness:
        return _lateness(self._read().rx_lateness, self.device.frame_time)

    @property
    def pause_rx(self) -> int:
        return self._read().pause_rx

    def paused_seconds(self, now: float) -> float:
        """Time the QPs' priority has been paused, up to ``now``."""
        c = self._read()
        return c.paused_s - max(0.0, c.paused_until[c.priority] - now)

    @property
    def tx_dropped(self) -> int:
        return self._read().tx_errors


class NativeDevice:
    """The C device of one engine: its NICs, QPs and completion queue."""

    def __init__(self, engine: "Engine", clock: EmulationClock, frame_time: float, max_rx_batch: int,
                 max_tx_batch: int, catchup_frames: float) -> None:
        self.engine = engine
        self.frame_time = frame_time
        c = lib.nic_device_new(clock.origin_ns, clock.dilation, frame_time, max_rx_batch, max_tx_batch,
                               catchup_frames)
        if c == ffi.NULL:
            raise ValueError(f"native NIC: cannot make a device (dilation {clock.dilation}, "
                             f"frame time {frame_time} s)")
        self.c = ffi.gc(c, lib.nic_device_free)
        self.completions = native.Completions(ffi.addressof(self.c, "cq"))
        self.Requester = functools.partial(native.Requester, completions=self.completions)
        self.Responder = functools.partial(native.Responder, completions=self.completions)
        self.nics: list[NativeNicPort] = []
        self._buffers: list[Any] = []       # the rings as C sees them, released at close
        self._notify = lib.nic_device_notify_fd(self.c)
        # The QPs' C state, freed only after the device (whose thread uses it) is.
        self.qps: list[Any] = []

    def _ring(self, port: InterfacePort) -> Any:
        mapping, block, frame, frames, nxt = port.nic_ring()
        base = ffi.from_buffer("uint8_t[]", mapping)
        self._buffers.append(base)
        return {"base": base, "len": len(mapping), "block_size": block, "frame_size": frame,
                "frames": frames, "next": nxt}

    def add_port(self, info: RankInfo, port: InterfacePort, mac: InterfacePort, line_rate_bps: float,
                 priority: int) -> NativeNicPort:
        """Rank ``info``'s NIC on its open ports (`tccl.nicports`): RoCE and MAC control."""
        index = lib.nic_device_add_port(self.c, port.fileno(), mac.fileno(), self._ring(port), self._ring(mac),
                                        bytes(int(x) for x in info.ip.split(".")), line_rate_bps, priority)
        if index < 0:
            raise ValueError(f"rank {info.rank}: the native NIC cannot use the rings of {info.iface}")
        nic = NativeNicPort(self, index, info, port, mac)
        self.nics.append(nic)
        return nic

    def start(self, quantum: float) -> None:
        """Start the NICs' thread (after every port is open): it receives, sends and
        times out from now on, its wake-ups ``quantum`` (emulated s) apart at least."""
        if lib.nic_device_start(self.c, quantum) != 0:
            raise OSError(f"native NIC: cannot start its thread (quantum {quantum})")

    def wait(self, timeout: float | None, wake_fd: int) -> bool:
        """Sleep until the NICs have something for the library -- reaped here -- or
        ``wake_fd`` is readable (a command: then True), for at most ``timeout`` wall
        seconds (None: no limit; 0: only look). A frame for a QP not yet created
        creates it (the peer's first message) or is ignored (not a QP of this job), as
        the Python engine decides."""
        ready = select.select([self._notify, wake_fd], [], [], timeout)[0]
        if self._notify in ready:
            try:
                os.read(self._notify, 8)
            except BlockingIOError:
                pass
        self.completions.reap()
        port = ffi.new("uint32_t *")
        qpn = lib.nic_device_need(self.c, port)
        if qpn != lib.NIC_NO_QPN:
            engine, nic = self.engine, self.nics[port[0]]
            ranks, index = qpn_ranks(qpn), qpn_index(qpn)
            if ranks is None or ranks[0] != nic.info.rank or ranks[1] not in engine.ranks \
                    or index >= engine.job.transport.qps:
                lib.nic_device_skip(self.c)
            else:
                engine.qp(*ranks, index)
        err = lib.nic_device_error(self.c)
        if err:
            raise OSError(err, f"native NIC: cannot wait on its sockets ({os.strerror(err)})")
        self.engine.rx_frames, self.engine.rx_ignored = self.c.rx_frames, self.c.rx_ignored
        return wake_fd in ready

    @property
    def wakeups(self) -> int:
        return self.c.wakeups

    def close(self) -> None:
        """Stop the NICs' thread, let go of the rings (before their ports close) and
        the C device."""
        lib.nic_device_stop(self.c)
        for buf in self._buffers:
            ffi.release(buf)
        self._buffers.clear()
        close_ports(port for nic in self.nics for port in (nic.port, nic.mac_control))
        self.nics.clear()
