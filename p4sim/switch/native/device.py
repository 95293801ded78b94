"""`NativeDevice`: the switch device of device.py with its packet loop in C (loop.c).

The same interface as `Device`, and the same setup: the ports' sockets and rings
(ports.py), the capture files (pcap.py), the traffic manager (tm.c behind
`NativeTrafficManager`), the emulation clock. Then `run` hands all of it to the C
loop, which reads the rings, runs the generated pipeline (`NativeSwitch`'s library,
through pipeline.h's table of functions), queues, transmits and captures without
Python. Python crosses in through ``lock`` (the P4Runtime server writing tables,
QueueControl, stats: holding it holds the C loop's mutex, so the loop is between two
wake-ups' work), through `inject` (PacketOut, a queue), and out through a thread that
waits on the loop's notify eventfd for PacketIns and for what to log.

Only a native pipeline runs here (`--engine native`, or `auto` when the program
allows it: command.py decides before building the device): a Python engine would
bring back the per-frame cost the C loop removes.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from typing import Any, Sequence

from p4sim.switch import device as reference
from p4sim.switch.device import Device
from p4sim.switch.ccodegen import Unsupported
from p4sim.switch.native import build as pipeline_build
from p4sim.switch.native.engine import NativeSwitch, make_engine
from p4sim.switch.native.libswitch import load
from p4sim.switch.native.tm import NativeTrafficManager
from p4sim.switch.ports import RING_BLOCKS
from p4sim.switch.v1model import V1Switch

log = logging.getLogger(__name__)

PACKET_IN_CAP = 1 << 17     # bytes: NativeSwitch's largest egress frame
EVENTS_BATCH = 64
# Receive ring of a port with no egress rate (nothing paces the link in front of it: the
# switch bench, a test's hosts): 8x ports.py's, 3584 slots, 32 MiB of kernel memory a
# port. The C loop forwards ~650 kpps, so ports.py's 448 slots rode out only 0.7 ms
# without the CPU -- one time slice lost to another process on a shared 2-core machine
# -- and the lossless rate was 3.5-7x the Python switch's while the overload rate was
# 12x; 3584 slots ride out 5.5 ms, near the 8 ms 448 give the Python loop. Paced ports
# (the fabric's) keep 448: at their line rates those ride out 0.4 s already.
UNPACED_RING_BLOCKS = 8 * RING_BLOCKS
# Emulated seconds a PacketIn may wait in the C queue for the ones after it: the relay
# thread wakes once per batch, not once per PacketIn. A wake-up of that Python thread
# (cold, ~150 us) cost the fabric's switches more than their C loops' per-frame work
# at astral.p4's 1-in-16 sampling. But astral.p4's ECN alarms are PacketIns too, and
# GOR's first-mark -> alarm goal is 10 ms: at 20 ms (batches of samples) the alarm
# waited a whole interval (`python -m bench gor`: p50 23.0 ms), at 4 ms 6.5, at 2 ms
# 4.2 (p99 4.8-5.4) -- 2 ms keeps bursts together and the alarm well inside its goal.
PACKET_IN_INTERVAL_S = 0.002


class _LoopLock:
    """``Device.lock`` for the native loop: reentrant in Python (an RLock), and the
    outermost holder also holds the C loop's mutex."""

    def __init__(self, lib: Any, dev: Any) -> None:
        self._lib, self._dev = lib, dev
        self._rlock = threading.RLock()
        self._depth = 0

    def __enter__(self) -> "_LoopLock":
        self._rlock.acquire()
        self._depth += 1
        if self._depth == 1:
            self._lib.p4n_device_lock(self._dev)   # cffi drops the GIL while it waits
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._lib.p4n_device_unlock(self._dev)
        self._rlock.release()


class NativeDevice(Device):
    """A v1model switch on Linux interfaces whose packets a C loop handles (module
    docstring); arguments as `Device`'s."""

    traffic_manager = NativeTrafficManager

    def ring_blocks(self, rate_bytes_per_s: float | None) -> int:
        """UNPACED_RING_BLOCKS on an unpaced port, RING_BLOCKS on a paced one (Device's)."""
        return RING_BLOCKS if rate_bytes_per_s else UNPACED_RING_BLOCKS

    def __init__(self, ports: dict[int, str], **kwargs: Any) -> None:
        kwargs.setdefault("engine", "native")
        self._closed_counters: dict[str, int] = {}
        if kwargs["engine"] not in ("native", "auto"):
            raise ValueError(f"the native device loop runs the native engine only, not {kwargs['engine']!r}")
        self._dev = None
        super().__init__(ports, **kwargs)
        try:
            self._attach()
        except BaseException:
            self.close()
            raise
        self._engines: dict[int, NativeSwitch] = {}   # generation -> engine, while its jobs queue
        self._generation = -1
        self._packet_in_handler = None
        self._packet_ins_heard = True

    def _attach(self) -> None:
        """Give the C loop the ports, captures, traffic manager and clock Device set up."""
        ffi, lib = self._ffi, self._lib = load()
        model = ffi.new("p4n_device_model *", {
            "wake_quantum_packet_times": reference.WAKE_QUANTUM_PACKET_TIMES,
            "rx_batch": reference.RX_BATCH, "backlog_warn_after_s": reference.BACKLOG_WARN_AFTER_S,
            "backlog_warn_every_s": reference.BACKLOG_WARN_EVERY_S,
            "kernel_drops_check_s": reference.KERNEL_DROPS_CHECK_S,
            "packet_in_interval_s": PACKET_IN_INTERVAL_S})
        clock = self.emulation_clock
        dev = lib.p4n_device_new(clock.origin_ns, clock.dilation, self.tm.tm, self._wakeup,
                                 -1 if self.cpu_port is None else self.cpu_port, model)
        if dev == ffi.NULL:
            raise MemoryError("native device: out of memory")
        self._dev = dev
        self.lock = _LoopLock(lib, dev)
        # The relay's buffers, made once: ffi.new zero-fills, and 128 KiB a wake-up was
        # a visible share of a fabric switch's CPU (the sampled PacketIns wake it often).
        self._relay_buffers = (ffi.new("uint8_t[]", PACKET_IN_CAP), ffi.new("p4n_device_event[]", EVENTS_BATCH))
        self._rings = []   # the mappings stay alive while C reads them
        for number, port in self._ports.items():
            ring, block, blocks, slot, max_frame = port.ring()
            self._rings.append(ring)
            if lib.p4n_device_add_port(dev, number, port.fileno(), ffi.from_buffer("uint8_t[]", ring), block,
                                       blocks, slot, max_frame, port.mac):
                raise ValueError(f"native device: port {number} cannot be added")
        if self.captures is not None:
            for number, (fd_in, fd_out) in self.captures.detach().items():
                if lib.p4n_device_capture(dev, number, fd_in, fd_out):
                    raise MemoryError("native device: out of memory for the captures")
            self.captures = None

    # ---- pipeline

    def install(self, engine: V1Switch | None) -> None:
        """Make ``engine`` (a `NativeSwitch`, or None) the running pipeline; packets of the
        previous one still queued are dropped at the head of their queue (counted in
        ``stale_after_reload``), its library kept until they are gone."""
        if engine is not None and not isinstance(engine, NativeSwitch):
            raise ValueError("the native device loop runs only a pipeline of the native engine")
        ffi, lib = self._ffi, self._lib
        with self.lock:
            if engine is None:
                lib.p4n_device_set_pipeline(self._dev, ffi.NULL, ffi.NULL, ffi.NULL)
                self._generation = -1
            else:
                sent = pipeline_build.ffi.addressof(pipeline_build.load(engine.library), "p4n_egress_sent")
                gen = lib.p4n_device_set_pipeline(self._dev, _pointer(ffi, engine.ops),
                                                  _pointer(ffi, engine.pipeline), _pointer(ffi, sent))
                if gen < 0:
                    raise RuntimeError("native device: too many pipelines still have packets queued")
                self._engines[gen] = engine
                self._generation = gen
            self.engine = engine
            self._engines = {g: e for g, e in self._engines.items()
                             if g == self._generation or lib.p4n_device_outstanding(self._dev, g)}
        self._wake()

    def make_engine(self, bmv2_json: dict) -> V1Switch:
        """A native engine for ``bmv2_json``; `Unsupported` (naming the construct) for a
        program only the Python engine runs, which this loop cannot call per frame --
        under ``auto`` the message also says how to run it."""
        try:
            return make_engine(bmv2_json, "native", cpu_port=self.cpu_port,
                               device_id=self.device_id, clock=self.clock)
        except Unsupported as exc:
            if self.engine_kind == "native":
                raise
            raise Unsupported(f"{exc}; this switch runs the native packet loop (--engine auto "
                              f"chose it at start, before any program): start it with "
                              f"--engine python for this program") from exc

    # ---- calls from other threads

    def _wake(self) -> None:
        """Device._wake through the C loop, which reads a flag before it asks ppoll."""
        if self._dev is None:
            super()._wake()
        else:
            self._lib.p4n_device_wake(self._dev)

    def inject(self, data: bytes, port: int | None = None) -> None:
        in_port = self.cpu_port if port is None else port
        if in_port is None:
            raise ValueError("packet injection needs a CPU port (--cpu-port) or an explicit port")
        if not 0 <= in_port < 512:
            raise ValueError(f"packet injection: port must be 0..511, got {in_port}")
        data = bytes(data)
        if self._lib.p4n_device_inject(self._dev, in_port, data, len(data)):
            raise MemoryError("native device: out of memory for a PacketOut")

    @property
    def packet_in_handler(self):
        return self._packet_in_handler

    @packet_in_handler.setter
    def packet_in_handler(self, handler) -> None:
        self._packet_in_handler = handler
        self._set_packet_in_mode()

    @property
    def packet_ins_heard(self) -> bool:
        return self._packet_ins_heard

    @packet_ins_heard.setter
    def packet_ins_heard(self, heard: bool) -> None:
        """runtime.dataplane.Dataplane's: while False the C loop counts PacketIns sent
        without queueing them for the handler, which would have found no one to send
        them to -- the relay thread's wake-ups were most of its CPU (docs/fabric.md)."""
        self._packet_ins_heard = heard
        self._set_packet_in_mode()

    def _set_packet_in_mode(self) -> None:
        if self._dev is None:
            return   # Device.__init__ sets the handler before the C loop exists
        lib = self._lib
        mode = (lib.P4N_PACKET_IN_OFF if self._packet_in_handler is None
                else lib.P4N_PACKET_IN_QUEUED if self._packet_ins_heard else lib.P4N_PACKET_IN_UNHEARD)
        lib.p4n_device_set_packet_in(self._dev, mode)

    @property
    def counters(self) -> dict[str, int]:
        """Device's counters, kept by the C loop (their last values once closed)."""
        if self._dev is None:
            return dict(self._closed_counters)
        c = self._lib.p4n_device_counters(self._dev)
        return {name: getattr(c, name) for name, _ in self._ffi.typeof("p4n_counters").fields}

    @counters.setter
    def counters(self, _initial: dict[str, int]) -> None:
        """Device.__init__ sets the Python loop's counters; the C loop keeps its own."""

    def _kernel_drops(self) -> int:
        return self._lib.p4n_device_kernel_drops(self._dev)

    def _saturated_s(self) -> float:
        return self._lib.p4n_device_saturated_s(self._dev)

    # ---- the loop

    def run(self) -> None:
        """Forward packets in C until ``stop`` is called. The C loop runs on a thread of
        its own, so that this one (the main thread, in `p4sim switch`) still runs the
        signal handlers that call `stop`."""
        run_devices([self])

    def stop(self) -> None:
        """Make ``run`` return; safe from any thread and from signal handlers."""
        self._stopping = True
        if self._dev is not None:
            self._lib.p4n_device_stop(self._dev)

    def _relay(self) -> None:
        """Wait on the loop's notify eventfd: PacketIns to the handler, reports to the log."""
        fd = self._lib.p4n_device_notify_fd(self._dev)
        while not self._stopping:
            try:
                os.eventfd_read(fd)
            except InterruptedError:
                continue
            self._relay_once()

    def _relay_once(self) -> None:
        ffi, lib = self._ffi, self._lib
        buf, events = self._relay_buffers
        while n := lib.p4n_device_packet_in(self._dev, buf, PACKET_IN_CAP):
            handler = self._packet_in_handler
            try:
                if handler is None:
                    raise RuntimeError("no PacketIn handler")
                handler(ffi.buffer(buf, n)[:])
            except Exception:
                lib.p4n_device_packet_in_failed(self._dev)
                log.exception("PacketIn handler failed on a %d-byte packet", n)
        while n := lib.p4n_device_events(self._dev, events, EVENTS_BATCH):
            for ev in events[0:n]:
                self._say(ev)

    def _say(self, ev: Any) -> None:
        lib = self._lib
        port = self._ports.get(ev.port)
        where = f"port {ev.port}" + (f" ({port.iface})" if port is not None else "")
        if ev.kind == lib.P4N_DEV_EV_TM:
            with self.lock:
                self.tm.report_events()
        elif ev.kind == lib.P4N_DEV_EV_SOCKET_ERROR:
            if ev.value == errno.ENETDOWN:   # said once by the kernel; the port keeps working
                log.info("%s: link went down", where)
            else:
                log.warning("%s: socket error: %s", where, os.strerror(ev.value))
        elif ev.kind == lib.P4N_DEV_EV_OVERSIZE:
            log.warning("%s: dropped a %d-byte frame that could not be received whole", where, ev.value)
        elif ev.kind == lib.P4N_DEV_EV_GSO:
            log.warning("%s: received a %d-byte frame, larger than the MTU: the sending host uses "
                        "segmentation offload; turn it off there (ethtool -K <host-iface> tso off "
                        "gso off)", where, ev.value)
        elif ev.kind == lib.P4N_DEV_EV_INGRESS_ERROR:
            log.error("ingress pipeline failed on a %d-byte packet from port %d", ev.value, ev.port)
        elif ev.kind == lib.P4N_DEV_EV_EGRESS_ERROR:
            log.error("egress pipeline failed on a packet for port %d", ev.port)
        elif ev.kind == lib.P4N_DEV_EV_BACKLOG:
            log.warning("input backlog: ports have had frames waiting for %.1f s; "
                        "the switch is not keeping up", ev.value / 1e6)
        elif ev.kind == lib.P4N_DEV_EV_KERNEL_DROPS:
            log.warning("input backlog: %s lost %d frames in the kernel (socket buffer full); "
                        "the switch is not keeping up", where, ev.value)

    def summary(self) -> str:
        with self.lock:
            drops = {p: st["drops"] for p, st in self.tm.stats().items() if st["drops"]}
            parts = [f"{k}={v}" for k, v in self.counters.items()] + [f"queue_drops={drops or 0}"]
            counters = self._ffi.new("p4n_port_counters *")
            per_port: dict[str, dict[int, int]] = {"tx_errors": {}, "rx_truncated": {}, "kernel_drops": {}}
            for number in self._ports:
                self._lib.p4n_device_port_counters(self._dev, number, counters)
                for what, values in per_port.items():
                    if getattr(counters, what):
                        values[number] = getattr(counters, what)
        parts += [f"{what}={values or 0}" for what, values in per_port.items()]
        return ", ".join(parts)

    def close(self) -> None:
        """Free the C loop (queued jobs go back to their pipelines), then what Device holds."""
        if self._dev is not None:
            self._closed_counters = self.counters
            self._lib.p4n_device_free(self._dev)
            self._dev = None
            self._engines = {}
        super().close()


def run_devices(devices: Sequence[NativeDevice]) -> None:
    """Forward the packets of ``devices`` (one emulation clock, one ``loop_cpu``) with
    one C loop thread (`LoopGroup`) until every one of them is stopped. One device is
    `NativeDevice.run`; several are `p4sim switches` (p4sim/switch/shared.py): one
    wake-up on the clock's grid serves them all, where separate loops wake once each.
    Returns on the calling thread, which meanwhile only waits, so the main thread
    keeps running the signal handlers that call `stop`."""
    if devices:
        LoopGroup(devices, stay=False).join()


class LoopGroup:
    """One C loop thread (`p4n_devices_run`) for a set of devices that may change while
    it runs: `add` a device, `remove` one (stopped, its rings no longer read, then
    closed by the caller) and the others go on. Each device keeps its own relay thread
    for PacketIns and what to log. A change ends the C call (its ``regroup`` flag) and
    the thread calls it again with the new set: a few microseconds once per change,
    against one set fixed at start (`p4sim switches`' members come and go,
    p4sim/switch/shared.py). ``stay``: keep the thread while no device runs (until
    `close`); otherwise it ends with the last device stopped."""

    def __init__(self, devices: Sequence[NativeDevice] = (), stay: bool = True) -> None:
        self._ffi, self._lib = load()
        self._stay = stay
        self._cond = threading.Condition()
        self._devices: list[NativeDevice] = []      # added and not yet retired
        self._running: list[NativeDevice] = []      # in the C call now
        self._relays: dict[int, threading.Thread] = {}
        self._regroup = self._ffi.new("int *")
        self._closed = False
        self._failed = False
        self._loop_cpu: int | None | str = "unset"  # the first device's: pinned once
        for d in devices[1:]:
            _check_shareable(devices[0], d)
        with self._cond:
            for d in devices:
                self._admit_locked(d)
        self._thread = threading.Thread(target=self._loop, name="native-device-loop", daemon=True)
        self._thread.start()

    def add(self, device: NativeDevice) -> None:
        """Run ``device`` in this loop from its next wake-up; `ValueError` when its clock
        or loop CPU is not the group's."""
        with self._cond:
            self._admit_locked(device)
            self._regroup_locked()

    def _admit_locked(self, device: NativeDevice) -> None:
        if self._devices or self._running:
            _check_shareable((self._devices or self._running)[0], device)
        relay = threading.Thread(target=device._relay, name=f"native-device-relay-{device.device_id}",
                                 daemon=True)
        self._relays[id(device)] = relay
        relay.start()
        self._devices.append(device)

    def remove(self, device: NativeDevice) -> None:
        """Stop ``device`` and return once the loop has let it go (its PacketIns and
        reports relayed, its summary logged): the caller may close it then."""
        with self._cond:
            device.stop()
            self._regroup_locked()
            # (A loop ended by a ppoll failure retires nothing more: do not wait for it.)
            self._cond.wait_for(lambda: device not in self._devices or self._failed)

    def close(self) -> None:
        """Stop every device and end the loop thread."""
        with self._cond:
            self._closed = True
            for d in self._devices:
                d.stop()
            self._regroup_locked()
        self.join()

    def join(self) -> None:
        """Wait for the loop thread to end; `OSError` when ppoll failed."""
        self._thread.join()
        if self._failed:
            raise OSError("native device loop: ppoll failed")

    def _regroup_locked(self) -> None:
        """Make the C call return (if one runs) and the thread pick the set again. The
        wake goes to a device still running: a stopped one's eventfd is no longer polled."""
        awake = [d for d in self._running if not d._stopping]
        if awake:
            self._regroup[0] = 1
            self._lib.p4n_device_wake(awake[0]._dev)
        self._cond.notify_all()

    def _which(self, d: NativeDevice) -> str:
        n = len(self._devices)
        return f", device {d.device_id} of {n} sharing it" if n > 1 or self._stay else ""

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    self._retire_locked()
                    live = [d for d in self._devices if not d._stopping]
                    if live or self._closed or not self._stay:
                        break
                    self._cond.wait()
                if not live:
                    return
                for d in live:
                    if d not in self._running:
                        log.info("switch running (native loop%s): %d ports%s", self._which(d), len(d._ports),
                                 "" if d.engine is not None else ", no pipeline loaded")
                self._running = live
                self._regroup[0] = 0
            if self._loop_cpu == "unset":
                self._loop_cpu = live[0].loop_cpu
                reference.pin_loop_thread(self._loop_cpu)
            array = self._ffi.new("p4n_device *[]", [d._dev for d in live])
            rc = self._lib.p4n_devices_run(array, len(live), self._regroup)
            with self._cond:
                if rc != 0:
                    self._failed = True
                    for d in self._devices:
                        d.stop()
                self._retire_locked()
                self._running = [d for d in live if d in self._devices]
                if self._failed:
                    self._running = []
                    return

    def _retire_locked(self) -> None:
        """Let go of the stopped devices the C loop no longer runs: their relay threads
        end (the loop's last notify woke them), what is left relayed, summary logged."""
        for d in [d for d in self._devices if d._stopping]:
            relay = self._relays.pop(id(d))
            os.eventfd_write(self._lib.p4n_device_notify_fd(d._dev), 1)   # stopped before the loop told it
            relay.join()
            d._relay_once()
            log.info("switch stopped%s: %s", self._which(d), d.summary())
            self._devices.remove(d)
        self._cond.notify_all()


def _check_shareable(first: NativeDevice, device: NativeDevice) -> None:
    """`ValueError` unless ``device`` may share ``first``'s loop: one clock, one loop CPU."""
    clocks = {(d.emulation_clock.origin_ns, d.emulation_clock.dilation) for d in (first, device)}
    cpus = {first.loop_cpu, device.loop_cpu}
    if len(clocks) > 1 or len(cpus) > 1:
        raise ValueError(f"one loop runs devices of one emulation clock and one loop CPU, "
                         f"got clocks {sorted(clocks)} and CPUs {sorted(cpus, key=str)}")


def _pointer(ffi: Any, cdata: Any) -> Any:
    """A pointer of another cffi instance (the pipeline's) as this one's ``void *``."""
    return ffi.cast("void *", int(pipeline_build.ffi.cast("uintptr_t", cdata)))
