"""What the P4Runtime server needs from the device it controls, and an in-process device.

The server never touches ports or queues itself. It talks to a `Dataplane`: build
and install engines (SetForwardingPipelineConfig), inject PacketOuts at the CPU port,
and receive what the pipeline sends to the CPU port (``packet_in_handler``). Every
engine call is made holding ``lock``, the lock the device's packet loop holds while it
processes a batch, so control-plane changes land between batches.
``p4sim.switch.device.Device`` is the real implementation; `LocalDataplane` runs the
engine synchronously with no queues (tests, scripts, the STF-style use of a switch).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Protocol

from p4sim.switch.native.engine import make_engine
from p4sim.switch.v1model import V1Switch, run_to_completion


class Dataplane(Protocol):
    """The device side of the server (see the module docstring)."""

    lock: Any  # a threading.RLock held around every engine call
    cpu_port: int | None
    packet_in_handler: Callable[[bytes], None] | None
    # Whether the handler has a controller to send PacketIns to (the server keeps it
    # current). While False a device may count them sent without calling the handler,
    # as the handler would have dropped them: the native loop then does not wake Python.
    packet_ins_heard: bool

    def make_engine(self, bmv2_json: dict) -> Any:
        """Build (do not install) an engine for this device from BMv2 JSON."""

    def install(self, engine: Any) -> None:
        """Make ``engine`` the running pipeline (None: no pipeline)."""

    def inject(self, data: bytes, port: int | None = None) -> None:
        """Feed a packet to the ingress pipeline as received on ``port`` (default: CPU port)."""


class LocalDataplane:
    """A `Dataplane` without ports: ``receive`` runs one packet through `run_to_completion`.

    Output to the CPU port goes to ``packet_in_handler`` (the server's PacketIn path);
    all other output goes to ``transmit(port, data)`` (by default collected in
    ``sent``), so a test can check where a packet went.
    """

    def __init__(self, *, device_id: int = 0, cpu_port: int | None = None,
                 transmit: Callable[[int, bytes], None] | None = None, engine: str = "python"):
        self.device_id = device_id
        self.engine_kind = engine   # native, python or auto (native.engine.make_engine)
        self.cpu_port = cpu_port
        self.lock = threading.RLock()
        self.engine: V1Switch | None = None
        self.packet_in_handler: Callable[[bytes], None] | None = None
        self.packet_ins_heard = True
        self.sent: list[tuple[int, bytes]] = []
        self._transmit = transmit or (lambda port, data: self.sent.append((port, data)))

    def make_engine(self, bmv2_json: dict) -> V1Switch:
        return make_engine(bmv2_json, self.engine_kind, cpu_port=self.cpu_port, device_id=self.device_id)

    def install(self, engine: V1Switch | None) -> None:
        with self.lock:
            self.engine = engine

    def inject(self, data: bytes, port: int | None = None) -> None:
        in_port = self.cpu_port if port is None else port
        if in_port is None:
            raise ValueError("packet injection needs a CPU port or an explicit port")
        self.receive(in_port, data)

    def receive(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """Process one packet from ``port``; returns every (port, packet) it produced."""
        with self.lock:
            if self.engine is None:
                return []
            outputs = run_to_completion(self.engine, port, bytes(data))
        for out_port, out in outputs:
            if out_port == self.cpu_port and self.packet_in_handler is not None:
                self.packet_in_handler(out)
            else:
                self._transmit(out_port, out)
        return outputs
