"""The gRPC ``p4.v1.P4Runtime`` service of a p4sim switch.

Transport only: each RPC checks who is asking (arbitration.py), what pipeline is set
(config.py / pipeline.py), runs the request against the device's engine under the
device lock, and maps errors to statuses as the spec says. A Write batch with failed
updates ends with UNKNOWN and one ``p4.v1.Error`` per update in the
``grpc-status-details-bin`` trailer (OK for the updates that were applied), kept within
what a default gRPC client accepts (`error_status`). A batch of any size is taken; one
with failures whose report does not fit (possible beyond `MAX_BATCH_UPDATES` updates)
is rolled back (rollback.py) and answered ABORTED without details: nothing applied. So
every answer tells the client exactly which of its updates took effect.

Hostile clients are expected: request bytes that do not parse are INVALID_ARGUMENT
(`rpc_handler` decodes them itself; gRPC's own decoding would answer INTERNAL), and
StreamChannels are capped (`MAX_STREAMS`) because each one holds a server worker for its
lifetime -- uncapped, idle streams starve Read and Write of workers.
"""

from __future__ import annotations

import base64
import logging
import queue
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

import grpc
from google.protobuf import any_pb2

from p4sim.proto import p4r, p4r_grpc, rpc_code, rpc_status
from p4sim.runtime import codec, rollback
from p4sim.runtime.arbitration import Arbitrator, Controller, RolePolicy
from p4sim.runtime.config import PipelineConfig, verify
from p4sim.runtime.dataplane import Dataplane
from p4sim.runtime.digests import DigestBatcher, DigestPump
from p4sim.runtime.errors import (
    NO_PIPELINE,
    BatchRolledBack,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    P4RuntimeError,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
    Unimplemented,
)
from p4sim.runtime.lenient import Undecodable, lenient
from p4sim.runtime.pipeline import Pipeline
from p4sim.runtime.schema import DigestInfo

log = logging.getLogger(__name__)

P4RUNTIME_API_VERSION = "1.5.0"  # the version of the protos p4sim.proto provides
MAX_STREAMS = 16
"""Open StreamChannels the server serves at once; one more is refused with
RESOURCE_EXHAUSTED. Each stream holds a worker thread for its lifetime, so the server's
pool is sized MAX_STREAMS plus the workers kept for unary RPCs (server.py)."""
TRAILER_LIMIT = 8 * 1024
"""Bytes of trailing metadata a default gRPC client accepts (``grpc.max_metadata_size``;
above it a client drops the trailer and sees RESOURCE_EXHAUSTED, losing every
per-update result). `error_status` keeps a failed batch's status within it."""
ERROR_MESSAGE_CHARS = 200  # longest per-update error message (and failure quoted in the headline)
_END = object()  # end-of-stream marker in a stream's outgoing queue
Action = p4r.SetForwardingPipelineConfigRequest


@dataclass(frozen=True)
class _Status:
    """A grpc.Status carrying a google.rpc.Status in the trailing metadata."""

    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple


def _abort(context: grpc.ServicerContext, err: P4RuntimeError) -> None:
    context.abort(err.code, err.message)


def _code_number(code: grpc.StatusCode) -> int:
    return code.value[0]


def _enum_name(enum, value: int) -> str:
    """The name of a proto enum value; proto3 enums are open, so unknown values arrive."""
    return enum.Name(value) if value in enum.values() else str(value)


def _packed_size(detail: p4r.Error) -> int:
    """Bytes one packed ``p4.v1.Error`` adds to a google.rpc.Status's ``details``."""
    any_msg = any_pb2.Any()
    any_msg.Pack(detail)
    n = any_msg.ByteSize()
    return 1 + len(_varint(n)) + n


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _message_bytes(message: str) -> int:
    """Bytes of ``grpc-message``: gRPC percent-encodes every byte outside printable ASCII,
    and ``%`` itself, as three."""
    return sum(1 if 0x20 <= b <= 0x7E and b != 0x25 else 3 for b in message.encode())


def _trailer_bytes(status: rpc_status.Status) -> int:
    """On-the-wire size of a status trailer: gRPC base64-encodes ``-bin`` metadata, the
    status message travels percent-encoded in ``grpc-message`` beside it, and header names
    and ``grpc-status`` take a few dozen bytes more (rounded up to 64)."""
    return len(base64.b64encode(status.SerializeToString())) + _message_bytes(status.message) + 64


def _headline(errors: list[P4RuntimeError | None]) -> str:
    """The batch status's message: how many failed and the first failure, its message cut
    to `ERROR_MESSAGE_CHARS` characters of printable ASCII (escaped), so its size has a bound."""
    failed = [i for i, e in enumerate(errors) if e is not None]
    first = errors[failed[0]]
    assert first is not None
    quoted = first.message.encode("unicode_escape").decode("ascii")[:ERROR_MESSAGE_CHARS]
    return f"{len(failed)} of {len(errors)} updates failed; first: update #{failed[0]}: {quoted}"


def _bare_report_bytes(n: int) -> int:
    """Trailer bytes of the largest report a batch of ``n`` updates can need before any
    message is added: all failed, one code each, the longest headline."""
    worst = P4RuntimeError("%" * ERROR_MESSAGE_CHARS, grpc.StatusCode.UNAUTHENTICATED)  # code 16, the highest
    status = rpc_status.Status(code=rpc_code.UNKNOWN, message=_headline([worst] * n))
    detail = p4r.Error(canonical_code=_code_number(worst.code))
    for _ in range(n):
        status.details.add().Pack(detail)
    return _trailer_bytes(status)


def _largest_reportable_batch() -> int:
    """The most updates whose one-``p4.v1.Error``-per-update report always fits `TRAILER_LIMIT`."""
    n = 1
    while _bare_report_bytes(n + 1) <= TRAILER_LIMIT:
        n += 1
    return n


MAX_BATCH_UPDATES = _largest_reportable_batch()
"""Updates whose one-error-per-update report always fits (about 140). A larger batch is
applied with an undo log: if some of its updates fail and their report does not fit, a
default client could not tell which updates were applied, so the batch is rolled back
and answered ABORTED (an RPC-wide status, without details: nothing applied)."""
READ_CHUNK = MAX_BATCH_UPDATES
"""Entities per ReadResponse: a client that deletes what each response gave it (finsy's
``delete_all``) then sends batches the server takes."""


def error_status(errors: list[P4RuntimeError | None]) -> rpc_status.Status:
    """The google.rpc.Status of a batch with failed updates.

    One ``p4.v1.Error`` per update, in order (the spec's format): OK for the applied
    ones, the failure's code for the others; within `TRAILER_LIMIT` whenever the batch
    has at most `MAX_BATCH_UPDATES` updates (`report_fits` says for a larger one).
    Failures keep their messages, cut to `ERROR_MESSAGE_CHARS`, from the first on while
    they fit; later ones keep their code.
    """
    headline = _headline(errors)
    report = [p4r.Error(canonical_code=rpc_code.OK) if e is None else p4r.Error(canonical_code=_code_number(e.code)) for e in errors]
    room = TRAILER_LIMIT - _trailer_bytes(rpc_status.Status(code=rpc_code.UNKNOWN, message=headline))
    room = room * 3 // 4  # base64 turns 3 bytes into 4
    used = sum(_packed_size(d) for d in report)
    for i, e in enumerate(errors):
        if e is None:
            continue
        with_message = p4r.Error(canonical_code=report[i].canonical_code, message=e.message[:ERROR_MESSAGE_CHARS])
        extra = _packed_size(with_message) - _packed_size(report[i])
        if used + extra > room:
            break
        report[i], used = with_message, used + extra
    status = rpc_status.Status(code=rpc_code.UNKNOWN, message=headline)
    for detail in report:
        status.details.add().Pack(detail)
    return status


def report_fits(status: rpc_status.Status) -> bool:
    """Whether a default gRPC client receives this status's trailer (`TRAILER_LIMIT`)."""
    return _trailer_bytes(status) <= TRAILER_LIMIT


def _unary(method: Callable) -> Callable:
    def run(request, context: grpc.ServicerContext):
        if isinstance(request, Undecodable):
            _abort(context, InvalidArgument(request.message))
        return method(request, context)

    return run


def rpc_handler(service: "P4RuntimeService") -> grpc.GenericRpcHandler:
    """The ``p4.v1.P4Runtime`` handlers of ``service``, with requests decoded leniently so
    that garbage bytes are the client's INVALID_ARGUMENT, not the server's INTERNAL."""
    methods = {
        "Write": (grpc.unary_unary_rpc_method_handler, p4r.WriteRequest, p4r.WriteResponse),
        "Read": (grpc.unary_stream_rpc_method_handler, p4r.ReadRequest, p4r.ReadResponse),
        "SetForwardingPipelineConfig": (grpc.unary_unary_rpc_method_handler, p4r.SetForwardingPipelineConfigRequest,
                                        p4r.SetForwardingPipelineConfigResponse),
        "GetForwardingPipelineConfig": (grpc.unary_unary_rpc_method_handler, p4r.GetForwardingPipelineConfigRequest,
                                        p4r.GetForwardingPipelineConfigResponse),
        "StreamChannel": (grpc.stream_stream_rpc_method_handler, p4r.StreamMessageRequest, p4r.StreamMessageResponse),
        "Capabilities": (grpc.unary_unary_rpc_method_handler, p4r.CapabilitiesRequest, p4r.CapabilitiesResponse),
    }
    handlers = {}
    for name, (make, request, response) in methods.items():
        behaviour = getattr(service, name)
        if make is not grpc.stream_stream_rpc_method_handler:
            behaviour = _unary(behaviour)
        handlers[name] = make(behaviour, request_deserializer=lenient(request),
                              response_serializer=response.SerializeToString)
    return grpc.method_handlers_generic_handler("p4.v1.P4Runtime", handlers)


class P4RuntimeService(p4r_grpc.P4RuntimeServicer):
    """P4Runtime for one device (``dataplane``); see the module docstring."""

    def __init__(self, dataplane: Dataplane, device_id: int = 0, max_streams: int = MAX_STREAMS):
        self.dataplane = dataplane
        self.device_id = device_id
        self.max_streams = max_streams
        self._streams = 0  # open StreamChannels
        self._outgoing: set[queue.SimpleQueue] = set()  # each open stream's outgoing queue
        self._stopping = False  # end_streams was called: a stream opening now ends at once
        self._streams_lock = threading.Lock()
        self.arbitrator = Arbitrator(device_id)
        self.pipeline: Pipeline | None = None
        self._saved: tuple[PipelineConfig, object] | None = None  # VERIFY_AND_SAVE'd config, engine
        self._config_lock = threading.Lock()  # one SetForwardingPipelineConfig or Write batch at a time
        self._digest_lock = threading.Lock()
        self._batcher = DigestBatcher(self._deliver_digest)
        self._pump = DigestPump(self._collect_digests)
        dataplane.packet_in_handler = self.packet_in
        dataplane.packet_ins_heard = False

    def start(self) -> None:
        self._pump.start()

    def stop(self) -> None:
        self._pump.stop()

    def end_streams(self) -> None:
        """End every open StreamChannel now with UNAVAILABLE ("the switch is stopping").

        A stream only ends when its client closes it, so a server stopping with a
        controller connected would otherwise hold it for the whole grace of
        ``grpc.Server.stop`` and then cancel it without a word; a controller told
        UNAVAILABLE reconnects as it does to a restarted switch. Unary calls in flight
        keep that grace (`RuntimeServer.stop`)."""
        with self._streams_lock:
            self._stopping = True
            open_streams = list(self._outgoing)
        for outgoing in open_streams:
            outgoing.put(Unavailable("the switch is stopping"))

    # -- helpers ------------------------------------------------------------------------------

    def _require_pipeline(self) -> Pipeline:
        pipeline = self.pipeline
        if pipeline is None:
            raise FailedPrecondition(NO_PIPELINE)
        return pipeline

    # -- Write / Read ---------------------------------------------------------------------------

    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:
        try:
            election = request.election_id if request.HasField("election_id") else None
            policy = self.arbitrator.check_primary(request.device_id, request.role, election)
            if request.atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR:
                name = _enum_name(p4r.WriteRequest.Atomicity, request.atomicity)
                if request.atomicity not in p4r.WriteRequest.Atomicity.values():
                    raise InvalidArgument(f"atomicity {name} is not a WriteRequest.Atomicity value")
                raise Unimplemented(f"atomicity {name} is not supported: p4sim applies batches with CONTINUE_ON_ERROR")
            errors = self.apply_updates(request.updates, policy)
        except P4RuntimeError as err:
            _abort(context, err)
        if any(e is not None for e in errors):
            self._abort_batch(context, errors)
        return p4r.WriteResponse()

    def apply_updates(self, updates, policy: RolePolicy) -> list[P4RuntimeError | None]:
        """Apply updates in order (CONTINUE_ON_ERROR); one error or None per update.

        The device lock is taken per update, not per batch, so the packet loop runs
        between updates: a batch of ten thousand updates would otherwise stop forwarding
        for its whole duration. The config lock keeps the pipeline the same throughout.
        A batch over `MAX_BATCH_UPDATES` keeps an undo log; if its failures' report does
        not fit a client's trailer, the batch is rolled back and `BatchRolledBack` raised.
        """
        errors: list[P4RuntimeError | None] = []
        undo_log: list[list[rollback.Undo]] | None = [] if len(updates) > MAX_BATCH_UPDATES else None
        with self._config_lock:
            pipeline = self._require_pipeline()
            for update in updates:
                undo: list[rollback.Undo] = []
                with self.dataplane.lock:
                    try:
                        if undo_log is not None:
                            undo = rollback.undo_of(pipeline, update)
                        pipeline.write(update, policy)
                        errors.append(None)
                    except P4RuntimeError as err:
                        errors.append(err)
                        undo = []
                    except Exception as exc:  # noqa: BLE001 - a server bug: report it, keep serving
                        log.exception("update failed unexpectedly: %s", update)
                        errors.append(P4RuntimeError(f"internal error: {exc!r}", grpc.StatusCode.INTERNAL))
                        undo = []
                if undo_log is not None:
                    undo_log.append(undo)
            if undo_log is not None and any(e is not None for e in errors) and not report_fits(error_status(errors)):
                with self.dataplane.lock:
                    rollback.roll_back(undo_log)
                raise BatchRolledBack(
                    f"{_headline(errors)}; the per-update errors of this batch do not fit the {TRAILER_LIMIT}-byte "
                    f"trailer a default gRPC client accepts, so it was rolled back: none of its {len(updates)} "
                    f"updates is applied (send at most {MAX_BATCH_UPDATES} updates per WriteRequest to get "
                    f"one error per update)")
        return errors

    @staticmethod
    def _abort_batch(context: grpc.ServicerContext, errors: list[P4RuntimeError | None]) -> None:
        status = error_status(errors)
        context.abort_with_status(
            _Status(grpc.StatusCode.UNKNOWN, status.message, (("grpc-status-details-bin", status.SerializeToString()),))
        )

    def Read(self, request: p4r.ReadRequest, context: grpc.ServicerContext) -> Iterator[p4r.ReadResponse]:
        try:
            self.arbitrator.check_device(request.device_id)
            pipeline = self._require_pipeline()
            with self.dataplane.lock:
                entities = [out for entity in request.entities for out in pipeline.read(entity)]
        except P4RuntimeError as err:
            _abort(context, err)
        for start in range(0, len(entities), READ_CHUNK):
            yield p4r.ReadResponse(entities=entities[start : start + READ_CHUNK])

    # -- pipeline config -------------------------------------------------------------------------

    def SetForwardingPipelineConfig(
        self, request: p4r.SetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.SetForwardingPipelineConfigResponse:
        try:
            election = request.election_id if request.HasField("election_id") else None
            policy = self.arbitrator.check_primary(request.device_id, request.role, election)
            if not policy.can_push_pipeline:
                raise PermissionDenied(f"role '{request.role}' may not push a forwarding pipeline config")
            with self._config_lock:
                self._set_config(request)
        except P4RuntimeError as err:
            _abort(context, err)
        return p4r.SetForwardingPipelineConfigResponse()

    def _set_config(self, request: p4r.SetForwardingPipelineConfigRequest) -> None:
        action = request.action
        if action == Action.COMMIT:
            if request.HasField("config"):
                raise InvalidArgument("COMMIT takes no config: it commits the one saved with VERIFY_AND_SAVE")
            if self._saved is None:
                raise NotFound("COMMIT: no forwarding pipeline config was saved with VERIFY_AND_SAVE")
            config, engine = self._saved
            self._commit(config, engine, reconcile=False)
            return
        if action not in (Action.VERIFY, Action.VERIFY_AND_SAVE, Action.VERIFY_AND_COMMIT, Action.RECONCILE_AND_COMMIT):
            raise InvalidArgument(f"SetForwardingPipelineConfig action {_enum_name(Action.Action, action)} is not valid")
        config = verify(request.config)
        try:
            engine = self.dataplane.make_engine(config.bmv2)
        except Exception as exc:  # noqa: BLE001 - any loader failure means a bad device config
            raise InvalidArgument(f"p4_device_config rejected by the switch engine: {exc}") from exc
        if action == Action.VERIFY:
            return
        if action == Action.VERIFY_AND_SAVE:
            self._saved = (config, engine)
            return
        self._commit(config, engine, reconcile=action == Action.RECONCILE_AND_COMMIT)

    def _commit(self, config: PipelineConfig, engine, reconcile: bool) -> None:
        new = Pipeline(config, engine)
        with self.dataplane.lock:
            if reconcile and self.pipeline is not None:
                self._replay(self.pipeline, new)
            self.dataplane.install(engine)
            self.pipeline = new
            self._saved = None
        with self._digest_lock:
            self._batcher = DigestBatcher(self._deliver_digest)
        self._pump.set_active(len(config.schema.digests) > 0)
        log.info("forwarding pipeline committed%s", " (state reconciled)" if reconcile else "")

    @staticmethod
    def _replay(old: Pipeline, new: Pipeline) -> None:
        """RECONCILE_AND_COMMIT: re-create the old forwarding state in the new pipeline."""
        everything = [
            p4r.Entity(action_profile_member=p4r.ActionProfileMember()),
            p4r.Entity(action_profile_group=p4r.ActionProfileGroup()),
            p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(multicast_group_entry={})),
            p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(clone_session_entry={})),
            p4r.Entity(digest_entry=p4r.DigestEntry()),
            p4r.Entity(table_entry=p4r.TableEntry(counter_data={}, meter_config={})),
        ]
        updates = [
            p4r.Update(type=p4r.Update.INSERT, entity=e)
            for q in everything
            for e in old.read(q)
            if not (e.HasField("table_entry") and e.table_entry.is_const)  # the program's own
        ]
        updates += [
            p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(table_entry=te))
            for te in old.tables.defaults.values()
        ]
        for q in (p4r.Entity(counter_entry={}), p4r.Entity(register_entry={}), p4r.Entity(value_set_entry={})):
            updates += [p4r.Update(type=p4r.Update.MODIFY, entity=e) for e in old.read(q)]
        updates += [
            p4r.Update(type=p4r.Update.MODIFY, entity=e)
            for e in old.read(p4r.Entity(meter_entry={}))
            if e.meter_entry.HasField("config")
        ]
        for update in updates:
            try:
                new.write(update, RolePolicy())
            except P4RuntimeError as err:
                raise InvalidArgument(f"RECONCILE_AND_COMMIT: the current state does not fit the new pipeline: {err.message}") from None

    def GetForwardingPipelineConfig(
        self, request: p4r.GetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.GetForwardingPipelineConfigResponse:
        rt = p4r.GetForwardingPipelineConfigRequest
        try:
            self.arbitrator.check_device(request.device_id)
            pipeline = self._require_pipeline()
            if request.response_type not in (rt.ALL, rt.COOKIE_ONLY, rt.P4INFO_AND_COOKIE, rt.DEVICE_CONFIG_AND_COOKIE):
                raise InvalidArgument(f"unknown response_type {request.response_type}")
        except P4RuntimeError as err:
            _abort(context, err)
        with_p4info = request.response_type in (rt.ALL, rt.P4INFO_AND_COOKIE)
        with_device = request.response_type in (rt.ALL, rt.DEVICE_CONFIG_AND_COOKIE)
        return p4r.GetForwardingPipelineConfigResponse(config=pipeline.config.to_proto(with_p4info, with_device))

    def Capabilities(self, request: p4r.CapabilitiesRequest, context: grpc.ServicerContext) -> p4r.CapabilitiesResponse:
        return p4r.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    # -- stream channel ------------------------------------------------------------------------

    def StreamChannel(self, request_iterator, context: grpc.ServicerContext) -> Iterator[p4r.StreamMessageResponse]:
        with self._streams_lock:
            refused = self._streams >= self.max_streams
            if not refused:
                self._streams += 1
        if refused:
            _abort(context, ResourceExhausted(f"too many open StreamChannels: this server serves {self.max_streams} at once"))
        try:
            yield from self._serve_stream(request_iterator, context)
        finally:
            with self._streams_lock:
                self._streams -= 1

    def _serve_stream(self, request_iterator, context: grpc.ServicerContext) -> Iterator[p4r.StreamMessageResponse]:
        outgoing: queue.SimpleQueue = queue.SimpleQueue()
        ctl = Controller(send=outgoing.put)
        context.add_callback(lambda: outgoing.put(_END))
        with self._streams_lock:
            self._outgoing.add(outgoing)
            if self._stopping:   # accepted just before the server stopped taking RPCs
                outgoing.put(Unavailable("the switch is stopping"))

        def read_requests() -> None:
            try:
                for request in request_iterator:
                    if isinstance(request, Undecodable):
                        outgoing.put(InvalidArgument(request.message))
                        return
                    try:
                        failure = self._stream_request(ctl, request)
                    except Exception as exc:  # noqa: BLE001 - a server bug: say so instead of a silent close
                        log.exception("stream message failed unexpectedly: %s", request)
                        failure = P4RuntimeError(f"internal error: {exc!r}", grpc.StatusCode.INTERNAL)
                    if failure is not None:
                        outgoing.put(failure)
                        return
            except Exception as exc:  # noqa: BLE001 - the client went away mid-stream
                log.debug("stream %d closed: %r", ctl.number, exc)
            outgoing.put(_END)

        threading.Thread(target=read_requests, name=f"p4rt-stream-{ctl.number}", daemon=True).start()
        try:
            while True:
                item = outgoing.get()
                if item is _END:
                    return
                if isinstance(item, P4RuntimeError):
                    _abort(context, item)
                yield item
        finally:
            with self._streams_lock:
                self._outgoing.discard(outgoing)
            self.arbitrator.remove(ctl)
            self._hear_packet_ins()

    def _stream_request(self, ctl: Controller, request: p4r.StreamMessageRequest) -> P4RuntimeError | None:
        """Handle one stream message; a returned error terminates the stream with it."""
        which = request.WhichOneof("update")
        if which == "arbitration":
            try:
                self.arbitrator.update(ctl, request.arbitration)
            except P4RuntimeError as err:
                return err
            finally:
                self._hear_packet_ins()
            return None
        try:
            if not ctl.arbitrated:
                raise FailedPrecondition("send a MasterArbitrationUpdate before any other stream message")
            if which == "packet":
                self._packet_out(ctl, request.packet)
            elif which == "digest_ack":
                with self._digest_lock:
                    self._batcher.ack(request.digest_ack.digest_id, request.digest_ack.list_id)
            else:
                raise Unimplemented(f"stream message {which or 'without content'} is not supported")
        except P4RuntimeError as err:
            stream_error = p4r.StreamError(canonical_code=_code_number(err.code), message=err.message)
            if which == "packet":
                stream_error.packet_out.packet_out.CopyFrom(request.packet)
            elif which == "digest_ack":
                stream_error.digest_list_ack.digest_list_ack.CopyFrom(request.digest_ack)
            ctl.send(p4r.StreamMessageResponse(error=stream_error))
        return None

    # -- packet I/O ----------------------------------------------------------------------------

    def _packet_out(self, ctl: Controller, packet: p4r.PacketOut) -> None:
        primaries = [c for c, _ in self.arbitrator.primaries()]
        if ctl not in primaries:
            raise PermissionDenied("PacketOut from a controller that is not primary")
        pipeline = self._require_pipeline()
        if self.dataplane.cpu_port is None:
            raise FailedPrecondition("PacketOut needs a CPU port: start the switch with --cpu-port")
        header = pipeline.schema.packet_out()
        data = bytes(packet.payload)
        if header is not None:
            values = {f.id: 0 for f in header.fields}
            given: set[int] = set()
            for md in packet.metadata:
                info = header.fields_by_id.get(md.metadata_id)
                if info is None:
                    raise InvalidArgument(f"packet_out has no metadata id {md.metadata_id}")
                if md.metadata_id in given:
                    raise InvalidArgument(f"packet_out metadata '{info.name}' given twice")
                given.add(md.metadata_id)
                values[md.metadata_id] = codec.bytes_to_int(md.value, info.bitwidth, f"packet_out metadata '{info.name}'")
            data = codec.pack_fields([values[f.id] for f in header.fields], [f.bitwidth for f in header.fields]) + data
        self.dataplane.inject(data)
        self._pump.wake()

    def _hear_packet_ins(self) -> None:
        """Tell the dataplane whether a primary takes PacketIns now (`packet_in` sends
        them to no one otherwise)."""
        self.dataplane.packet_ins_heard = any(p.receives_packet_ins for _, p in self.arbitrator.primaries())

    def packet_in(self, data: bytes) -> None:
        """A packet the pipeline sent to the CPU port: strip packet_in, stream it to primaries."""
        pipeline = self.pipeline
        if pipeline is None:
            return
        header = pipeline.schema.packet_in()
        msg = p4r.PacketIn(payload=data)
        if header is not None:
            if len(data) < header.byte_length:
                log.warning("dropping a %d-byte packet to the CPU port: shorter than its packet_in header", len(data))
                return
            values = codec.unpack_fields(data, [f.bitwidth for f in header.fields])
            msg = p4r.PacketIn(
                payload=data[header.byte_length :],
                metadata=[p4r.PacketMetadata(metadata_id=f.id, value=codec.int_to_bytes(v)) for f, v in zip(header.fields, values)],
            )
        for ctl, policy in self.arbitrator.primaries():
            if not policy.receives_packet_ins:
                continue
            if policy.packet_in_filter is not None:
                mid, value = policy.packet_in_filter
                if not any(md.metadata_id == mid and md.value == value for md in msg.metadata):
                    continue
            ctl.send(p4r.StreamMessageResponse(packet=msg))

    # -- digests -------------------------------------------------------------------------------

    def _collect_digests(self, now_ns: int) -> int | None:
        with self.dataplane.lock:
            pipeline = self.pipeline
            if pipeline is None:
                return None
            raw = pipeline.switch.pop_digests()
            configs = {
                did: (pipeline.schema.digests.get(did), cfg) for did, cfg in pipeline.externs.digest_configs.items()
            }
        with self._digest_lock:
            for name, messages in raw:
                info = _digest_named(pipeline, name)
                if info is None or info.id not in configs:
                    continue
                for values in messages:
                    self._batcher.add(info, configs[info.id][1], tuple(values), now_ns)
            return self._batcher.flush_due(configs, now_ns)

    def _deliver_digest(self, digest: p4r.DigestList) -> None:
        for ctl, policy in self.arbitrator.primaries():
            if policy.writable_ids is None or digest.digest_id in policy.writable_ids:
                ctl.send(p4r.StreamMessageResponse(digest=digest))


def _digest_named(pipeline: Pipeline, name: str) -> DigestInfo | None:
    """The P4Info digest for an engine learn-list name (same name, or same last component)."""
    for info in pipeline.schema.digests:
        if info.name == name or info.name.split(".")[-1] == name.split(".")[-1]:
            return info
    return None
