"""Runtime queue control: change a port's rate or queue depth while the switch runs.

P4Runtime does not cover traffic management, so p4sim adds a tiny gRPC service next to
P4Runtime on the same address, ``p4sim.QueueControl``, whose messages are
``google.protobuf.Struct`` (no extra .proto to compile; any gRPC client can call it):

=============== ========================================= ===============================
method          request fields                            effect
=============== ========================================= ===============================
SetPortRate     port, rate_mbps (null: unlimited)         line rate of the port
SetQueueRate    port (absent: all), pps (null: unlimited) packets/s limit (BMv2's
                                                          set_queue_rate)
SetQueueDepth   port (absent: all), packets               queue capacity in packets
SetPfc          priorities ([] : off), xoff, xon,         PFC (p4sim/switch/pfc.py)
                headroom (bytes), watchdog_ms
GetQueueStats   (none)                                    {"ports": {"<port>": {...}}}
                                                          (with each port's "pfc" counters)
GetFidelity     (none)                                    cumulative fidelity counters
                                                          (emulation/fidelity.py)
GetPortStatus   (none)                                    {"ports": {"<port>": "UP" or
                                                          "DOWN"}}: each interface's
                                                          operational state, read by the
                                                          switch in its own namespace
=============== ========================================= ===============================

GetPortStatus is what GOR watches cables by: the switch itself reports its ports'
oper status (OpenConfig's ``oper-status`` values), so the controller needs no view
of the switch's machine -- a switch on another machine of a cluster reports the same.

The server forwards each call to a `QueueControl` (in-process: the switch device);
`QueueControlClient` is the client side, used by experiments and the CLI.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import grpc
from google.protobuf import json_format, struct_pb2

from p4sim.runtime.lenient import unary_handler
from p4sim.switch.pfc import PfcConfig

SERVICE = "p4sim.QueueControl"


class QueueControl(Protocol):
    """The traffic-manager side (implemented by ``p4sim.switch.device.Device``)."""

    def set_port_rate(self, port: int, bytes_per_s: float | None) -> None: ...

    def set_queue_rate(self, port: int | None, pps: float | None) -> None: ...

    def set_queue_depth(self, port: int | None, packets: int) -> None: ...

    def set_pfc(self, config: PfcConfig | None) -> None: ...

    def queue_stats(self) -> dict[int, dict[str, Any]]: ...

    def fidelity(self) -> dict[str, Any]: ...

    def port_status(self) -> dict[int, bool]: ...


# A port's operational state on the wire (OpenConfig interfaces' oper-status values).
OPER_UP, OPER_DOWN = "UP", "DOWN"


def _struct(d: dict) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(d)
    return out


def _port(req: dict, required: bool) -> int | None:
    port = req.get("port")
    if port is None:
        if required:
            raise ValueError("'port' is required")
        return None
    if isinstance(port, bool) or not isinstance(port, (int, float)) or not float(port).is_integer() or port < 0:
        raise ValueError(f"'port' must be a port number, got {port!r}")
    return int(port)


def _number(req: dict, key: str, allow_null: bool) -> float | None:
    if key not in req:
        raise ValueError(f"'{key}' is required")
    value = req[key]
    if value is None and allow_null:
        return None
    if not isinstance(value, (int, float)):
        raise ValueError(f"'{key}' must be a number{' or null' if allow_null else ''}, got {value!r}")
    return float(value)


def handler(control: QueueControl) -> grpc.GenericRpcHandler:
    """The gRPC handler serving ``control`` as the ``p4sim.QueueControl`` service."""

    def set_port_rate(req: dict) -> dict:
        mbps = _number(req, "rate_mbps", allow_null=True)
        control.set_port_rate(_port(req, True), None if mbps is None else mbps * 1e6 / 8)
        return {}

    def set_queue_rate(req: dict) -> dict:
        control.set_queue_rate(_port(req, False), _number(req, "pps", allow_null=True))
        return {}

    def set_queue_depth(req: dict) -> dict:
        packets = _number(req, "packets", allow_null=False)
        if packets is None or not packets.is_integer():
            raise ValueError(f"'packets' must be a whole number, got {packets}")
        control.set_queue_depth(_port(req, False), int(packets))
        return {}

    def set_pfc(req: dict) -> dict:
        priorities = req.get("priorities")
        if not isinstance(priorities, list) or not all(isinstance(p, (int, float)) and float(p).is_integer()
                                                       for p in priorities):
            raise ValueError(f"'priorities' must be a list of priorities (empty: PFC off), got {priorities!r}")
        if not priorities:
            control.set_pfc(None)
            return {}
        numbers = {k: _number(req, k, allow_null=False) for k in ("xoff", "xon", "headroom")}
        watchdog = _number(req, "watchdog_ms", allow_null=False) if "watchdog_ms" in req else 0.0
        control.set_pfc(PfcConfig(frozenset(int(p) for p in priorities), int(numbers["xoff"]),
                                  int(numbers["xon"]), int(numbers["headroom"]), watchdog * 1e3))
        return {}

    def queue_stats(req: dict) -> dict:
        return {"ports": {str(p): s for p, s in control.queue_stats().items()}}

    def fidelity(req: dict) -> dict:
        return control.fidelity()

    def port_status(req: dict) -> dict:
        return {"ports": {str(p): OPER_UP if up else OPER_DOWN for p, up in control.port_status().items()}}

    def wrap(fn: Callable[[dict], dict]):
        def call(request: struct_pb2.Struct, context: grpc.ServicerContext) -> struct_pb2.Struct:
            try:
                return _struct(fn(json_format.MessageToDict(request)))
            except ValueError as exc:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

        return unary_handler(call, struct_pb2.Struct, struct_pb2.Struct)

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "SetPortRate": wrap(set_port_rate),
            "SetQueueRate": wrap(set_queue_rate),
            "SetQueueDepth": wrap(set_queue_depth),
            "SetPfc": wrap(set_pfc),
            "GetQueueStats": wrap(queue_stats),
            "GetFidelity": wrap(fidelity),
            "GetPortStatus": wrap(port_status),
        },
    )


class QueueControlClient:
    """Client of the ``p4sim.QueueControl`` service on a gRPC channel."""

    def __init__(self, channel: grpc.Channel, timeout: float = 10.0):
        self._timeout = timeout
        self._calls = {
            name: channel.unary_unary(
                f"/{SERVICE}/{name}",
                request_serializer=struct_pb2.Struct.SerializeToString,
                response_deserializer=struct_pb2.Struct.FromString,
            )
            for name in ("SetPortRate", "SetQueueRate", "SetQueueDepth", "SetPfc", "GetQueueStats",
                         "GetFidelity", "GetPortStatus")
        }

    def _call(self, name: str, **fields: Any) -> dict:
        return json_format.MessageToDict(self._calls[name](_struct(fields), timeout=self._timeout))

    def set_port_rate(self, port: int, rate_mbps: float | None) -> None:
        self._call("SetPortRate", port=port, rate_mbps=rate_mbps)

    def set_queue_rate(self, pps: float | None, port: int | None = None) -> None:
        self._call("SetQueueRate", pps=pps, **({} if port is None else {"port": port}))

    def set_queue_depth(self, packets: int, port: int | None = None) -> None:
        self._call("SetQueueDepth", packets=packets, **({} if port is None else {"port": port}))

    def set_pfc(self, priorities: list[int], xoff: int = 0, xon: int = 0, headroom: int = 0,
                watchdog_ms: float = 0.0) -> None:
        """Make ``priorities`` lossless with these thresholds (bytes); [] turns PFC off."""
        self._call("SetPfc", priorities=list(priorities), xoff=xoff, xon=xon, headroom=headroom,
                   watchdog_ms=watchdog_ms)

    def queue_stats(self) -> dict[int, dict[str, Any]]:
        return {int(p): s for p, s in self._call("GetQueueStats").get("ports", {}).items()}

    def fidelity(self) -> dict[str, Any]:
        """The switch's cumulative fidelity counters (`Device.fidelity`)."""
        return self._call("GetFidelity")

    def port_status(self) -> dict[int, bool]:
        """Each port's operational state as the switch reads it (True: up); raises
        ValueError on a status that is neither "UP" nor "DOWN", naming the port."""
        out = {}
        for port, status in self._call("GetPortStatus").get("ports", {}).items():
            if status not in (OPER_UP, OPER_DOWN):
                raise ValueError(f"GetPortStatus: port {port} has oper status {status!r}, not UP or DOWN")
            out[int(port)] = status == OPER_UP
        return out


def fidelity_of(clients: dict[str, QueueControlClient]) -> dict[str, dict[str, Any]]:
    """Every named switch's cumulative fidelity counters; a switch that does not answer
    is left out (and counts from zero in `emulation.fidelity.switches_window`)."""
    out = {}
    for name, client in clients.items():
        try:
            out[name] = client.fidelity()
        except grpc.RpcError:
            continue
    return out
