"""The agent's control channel: gRPC on a Unix socket in the run directory.

Service ``tccl.Agent`` (equivalent .proto in docs/tccl.md):

* ``ListFlows``      -> every queue pair's flow: 5-tuple, QPN, bytes, rate, state;
* ``SetSourcePort``  -> move a flow to another UDP source port at its next message
  boundary; the reply comes once the flow uses the new port (the acknowledgement),
  with when the agent got the request and when the boundary passed (the fabric's
  emulated clock, so the caller can tell its own share from the agent's);
* ``GetStats``       -> agent-wide counters.

Unknown flows answer NOT_FOUND, invalid ports or timeouts and request bytes that do not
decode INVALID_ARGUMENT, a change not applied within the deadline DEADLINE_EXCEEDED --
each with a message naming the flow, port or field.

Why no generated code: grpcio-tools (protoc) is not among the project's pinned
packages, so the messages are declared here as a FileDescriptorProto and turned into
ordinary protobuf classes by the runtime, and the service is registered with gRPC's
generic handlers. The wire format is exactly what protoc-generated stubs would speak.
"""

from __future__ import annotations

from concurrent import futures
from pathlib import Path
from typing import Any, Callable

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from p4sim.runtime.lenient import unary_handler
from tccl.engine import Engine, QueuePair

SERVICE = "tccl.Agent"
# Requests served at once: a SetSourcePort holds its worker until the flow's boundary,
# and GOR may move every flow of an agent in one tick (with 4, the fifth move and any
# listing queued behind the others' boundaries, unmeasured by their waited_s).
WORKERS = 32
APPLY_TIMEOUT = 10.0          # default wait for a port change to reach a message boundary (s)
MAX_APPLY_TIMEOUT = 3600.0    # longest wait a request may ask for: a job's lifetime, not forever

_T = descriptor_pb2.FieldDescriptorProto
_TYPES = {"uint32": _T.TYPE_UINT32, "uint64": _T.TYPE_UINT64, "double": _T.TYPE_DOUBLE,
          "string": _T.TYPE_STRING}

# message -> [(field, type or message name, repeated)]; field numbers follow the list
# order, so new fields go at the end (docs/tccl.md lists the numbers).
_MESSAGES: dict[str, list[tuple[str, str, bool]]] = {
    "Flow": [("qpn", "uint32", False), ("local_rank", "uint32", False), ("peer_rank", "uint32", False),
             ("src_ip", "string", False), ("dst_ip", "string", False), ("sport", "uint32", False),
             ("dport", "uint32", False), ("bytes", "uint64", False), ("packets", "uint64", False),
             ("rate_bps", "double", False), ("state", "string", False),
             ("retransmits", "uint64", False), ("cnps", "uint64", False),
             ("ce_marked_rx", "uint64", False), ("naks", "uint64", False),
             ("timeouts", "uint64", False), ("acked_bytes", "uint64", False),
             ("qp_index", "uint32", False), ("created_ns", "uint64", False)],
    "FlowRef": [("qpn", "uint32", False), ("src_ip", "string", False), ("dst_ip", "string", False),
                ("sport", "uint32", False)],
    "ListFlowsRequest": [],
    "ListFlowsReply": [("flows", "Flow", True)],
    "SetSourcePortRequest": [("flow", "FlowRef", False), ("sport", "uint32", False),
                             ("timeout_s", "double", False)],
    "SetSourcePortReply": [("flow", "Flow", False), ("old_sport", "uint32", False),
                           ("waited_s", "double", False), ("received_s", "double", False),
                           ("applied_s", "double", False)],
    "StatsRequest": [],
    "StatsReply": [("server", "string", False), ("rx_frames", "uint64", False),
                   ("rx_ignored", "uint64", False), ("tx_dropped", "uint64", False),
                   ("flows", "Flow", True)],
}
_METHODS = {"ListFlows": ("ListFlowsRequest", "ListFlowsReply"),
            "SetSourcePort": ("SetSourcePortRequest", "SetSourcePortReply"),
            "GetStats": ("StatsRequest", "StatsReply")}


def _build() -> dict[str, Any]:
    fd = descriptor_pb2.FileDescriptorProto(name="tccl/agent.proto", package="tccl", syntax="proto3")
    for name, fields in _MESSAGES.items():
        msg = fd.message_type.add(name=name)
        for number, (fname, ftype, repeated) in enumerate(fields, start=1):
            f = msg.field.add(name=fname, number=number,
                              label=_T.LABEL_REPEATED if repeated else _T.LABEL_OPTIONAL)
            if ftype in _TYPES:
                f.type = _TYPES[ftype]
            else:
                f.type, f.type_name = _T.TYPE_MESSAGE, f".tccl.{ftype}"
    svc = fd.service.add(name="Agent")
    for method, (req, rep) in _METHODS.items():
        svc.method.add(name=method, input_type=f".tccl.{req}", output_type=f".tccl.{rep}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tccl.{name}"))
            for name in _MESSAGES}


MESSAGES = _build()
Flow = MESSAGES["Flow"]


def socket_path(run_dir: str | Path, server: str) -> Path:
    """Where the agent of ``server`` listens (hosts share the filesystem)."""
    return Path(run_dir) / f"tccl-{server}.sock"


def _flow_msg(qp: QueuePair) -> Any:
    return Flow(**qp.describe())


class ControlServer:
    """Serves ``tccl.Agent`` for one engine; every state access runs on the engine thread."""

    def __init__(self, engine: Engine, path: str | Path) -> None:
        self.engine = engine
        self.path = Path(path)
        self._server: grpc.Server | None = None

    def start(self) -> "ControlServer":
        self.path.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=WORKERS))
        handlers = {method: unary_handler(getattr(self, method), MESSAGES[req], MESSAGES[rep])
                    for method, (req, rep) in _METHODS.items()}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        server.add_insecure_port(f"unix:{self.path}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=0.5).wait()
            self._server = None
        self.path.unlink(missing_ok=True)

    def _on_engine(self, fn: Callable[[], Any], context: grpc.ServicerContext, timeout: float = 5.0) -> Any:
        fut = self.engine.call(fn)
        try:
            return fut.result(timeout)
        except futures.TimeoutError:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the agent's event loop did not answer in time")

    def ListFlows(self, request: Any, context: grpc.ServicerContext) -> Any:
        flows = self._on_engine(lambda: [_flow_msg(qp) for qp in self.engine.qps.values()], context)
        return MESSAGES["ListFlowsReply"](flows=flows)

    def GetStats(self, request: Any, context: grpc.ServicerContext) -> Any:
        def collect() -> Any:
            e = self.engine
            return MESSAGES["StatsReply"](
                server=e.server, rx_frames=e.rx_frames, rx_ignored=e.rx_ignored,
                tx_dropped=sum(n.tx_dropped for n in e.nics.values()),
                flows=[_flow_msg(qp) for qp in e.qps.values()])
        return self._on_engine(collect, context)

    def _find(self, ref: Any) -> QueuePair:
        qps = self.engine.qps
        if ref.qpn:
            if ref.qpn in qps:
                return qps[ref.qpn]
            raise LookupError(f"no flow with QPN {ref.qpn:#x} on {self.engine.server} "
                              f"(flows: {', '.join(f'{q:#x}' for q in qps) or 'none'})")
        for qp in qps.values():
            if (qp.local.ip, qp.peer.ip) == (ref.src_ip, ref.dst_ip) and \
                    (ref.sport == 0 or qp.requester.sport == ref.sport):
                return qp
        raise LookupError(f"no flow {ref.src_ip}:{ref.sport} -> {ref.dst_ip} on {self.engine.server}")

    def SetSourcePort(self, request: Any, context: grpc.ServicerContext) -> Any:
        port = request.sport
        if not 1024 <= port <= 65535:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"invalid source port {port}: must be 1024..65535")
        if not request.HasField("flow"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no flow given (qpn or src_ip/dst_ip)")
        if not 0 <= request.timeout_s <= MAX_APPLY_TIMEOUT:   # NaN fails both comparisons
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"invalid timeout_s {request.timeout_s}: must be 0 (default {APPLY_TIMEOUT:g} s) "
                          f"to {MAX_APPLY_TIMEOUT:g}")

        answer: dict[str, Any] = {}

        def request_change() -> Any:
            qp = self._find(request.flow)

            def at_boundary() -> None:
                # On the engine thread as the flow passes its boundary: the answer is
                # taken here, so sending it waits for no further turn of the loop.
                answer.update(flow=_flow_msg(qp), at=self.engine.clock())
            return qp, qp.requester.request_port(port, on_applied=at_boundary)

        started = self.engine.clock()
        try:
            qp, change = self._on_engine(request_change, context)
        except LookupError as e:
            context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except ValueError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        timeout = request.timeout_s or APPLY_TIMEOUT
        if not self.engine.emulation_clock.wait(change.done, timeout):
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                          f"flow {qp.qpn:#x} did not reach a message boundary in {timeout:.1f}s; "
                          f"the change stays pending")
        return MESSAGES["SetSourcePortReply"](flow=answer["flow"], old_sport=change.old_port,
                                              waited_s=answer["at"] - started, received_s=started,
                                              applied_s=answer["at"])


class AgentClient:
    """Client of one agent's control channel (used by GOR and the tests)."""

    def __init__(self, path: str | Path, timeout: float = 15.0) -> None:
        self.channel = grpc.insecure_channel(f"unix:{path}")
        self.timeout = timeout
        self._stubs = {m: self.channel.unary_unary(
            f"/{SERVICE}/{m}", request_serializer=MESSAGES[req].SerializeToString,
            response_deserializer=MESSAGES[rep].FromString) for m, (req, rep) in _METHODS.items()}

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "AgentClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def list_flows(self) -> list[Any]:
        return list(self._stubs["ListFlows"](MESSAGES["ListFlowsRequest"](), timeout=self.timeout).flows)

    def stats(self) -> Any:
        return self._stubs["GetStats"](MESSAGES["StatsRequest"](), timeout=self.timeout)

    def set_source_port(self, sport: int, qpn: int = 0, src_ip: str = "", dst_ip: str = "",
                        current_sport: int = 0, timeout_s: float = 0.0) -> Any:
        """Move a flow (by QPN, or by its addresses and current port) to ``sport``."""
        ref = MESSAGES["FlowRef"](qpn=qpn, src_ip=src_ip, dst_ip=dst_ip, sport=current_sport)
        req = MESSAGES["SetSourcePortRequest"](flow=ref, sport=sport, timeout_s=timeout_s)
        return self._stubs["SetSourcePort"](req, timeout=max(self.timeout, min(timeout_s, MAX_APPLY_TIMEOUT) + 5))
