"""Test harness for the P4Runtime server: a real gRPC server on 127.0.0.1 and raw clients.

`Runtime` starts `RuntimeServer` over a `LocalDataplane` (the engine runs packets
synchronously; output ports are recorded) on a free port; `Stream` is a StreamChannel
client whose responses are read by a thread into a queue, so tests wait for messages
with a timeout instead of sleeping.
"""

from __future__ import annotations

import functools
import json
import queue
import threading
from pathlib import Path
from typing import Iterator

import grpc
import pytest
from google.protobuf import text_format
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4sim.proto import p4i, p4r, p4r_grpc, rpc_status
from p4sim.runtime.dataplane import LocalDataplane
from p4sim.runtime.server import RuntimeServer

FIXTURES = Path(__file__).parent
DEVICE_ID = 1
CPU_PORT = 64


ARTEFACTS = ("hand-written", "compiled")
"""Where the fixture's P4Info + BMv2 JSON come from: the files next to small.p4 (written to
match p4c), or p4sim's own compiler run on small.p4 -- the server must work with both."""


def load_p4info() -> p4i.P4Info:
    return text_format.Parse((FIXTURES / "small.p4info.txtpb").read_text(), p4i.P4Info())


def load_device_config() -> bytes:
    return (FIXTURES / "small.json").read_bytes()


@functools.cache
def _compiled() -> tuple[bytes, bytes]:
    from p4sim.compiler import compile_file  # only the "compiled" variant depends on the compiler

    result = compile_file(str(FIXTURES / "small.p4"))
    return result.p4info.SerializeToString(), json.dumps(result.bmv2_json).encode()


def load_artefacts(source: str) -> tuple[p4i.P4Info, bytes]:
    """(P4Info, BMv2 JSON bytes) of the fixture program from ``source`` (see ARTEFACTS)."""
    if source == "compiled":
        p4info, device_config = _compiled()
        return p4i.P4Info.FromString(p4info), device_config
    return load_p4info(), load_device_config()


class ClosedByServer(Exception):
    """The server ended a stream with OK while the client still had it open: a stream
    should only end on the client's close or with an error status saying why."""


class Stream:
    """One StreamChannel: ``send`` requests, ``recv`` responses (or the error ending it)."""

    def __init__(self, stub: p4r_grpc.P4RuntimeStub):
        self._requests: queue.Queue = queue.Queue()
        self._responses: queue.Queue = queue.Queue()
        self.call = stub.StreamChannel(iter(self._requests.get, None))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for response in self.call:
                self._responses.put(response)
        except grpc.RpcError as err:
            self._responses.put(err)
        else:
            self._responses.put(ClosedByServer("the server closed the stream without a status"))

    def send(self, msg: p4r.StreamMessageRequest) -> None:
        self._requests.put(msg)

    def recv(self, timeout: float = 5.0) -> p4r.StreamMessageResponse:
        item = self._responses.get(timeout=timeout)
        if isinstance(item, Exception):
            raise item
        return item

    def poll(self) -> p4r.StreamMessageResponse | grpc.RpcError | ClosedByServer | None:
        """The next response or ending error if one has arrived, else None (no waiting)."""
        try:
            return self._responses.get_nowait()
        except queue.Empty:
            return None

    def recv_error(self, timeout: float = 5.0) -> grpc.RpcError:
        item = self._responses.get(timeout=timeout)
        assert isinstance(item, grpc.RpcError), f"expected the stream to end with an error, got {item}"
        return item

    def arbitrate(self, election_id: int, role: str = "") -> p4r.MasterArbitrationUpdate:
        msg = p4r.MasterArbitrationUpdate(device_id=DEVICE_ID, election_id=p4r.Uint128(low=election_id))
        if role:
            msg.role.name = role
        self.send(p4r.StreamMessageRequest(arbitration=msg))
        return self.recv().arbitration

    def close(self) -> None:
        self._requests.put(None)
        self.call.cancel()
        self._thread.join(timeout=5)


class Runtime:
    """A P4Runtime server on a free local port, a stub, and helpers to drive both."""

    def __init__(self, queue_control=None, artefacts: str = "hand-written", engine: str = "python"):
        self.dataplane = LocalDataplane(device_id=DEVICE_ID, cpu_port=CPU_PORT, engine=engine)
        self.server = RuntimeServer(self.dataplane, "127.0.0.1:0", device_id=DEVICE_ID, queue_control=queue_control)
        self.server.start()
        self.address = f"127.0.0.1:{self.server.port}"
        self.channel = grpc.insecure_channel(self.address)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self.p4info, self.device_config = load_artefacts(artefacts)
        self.streams: list[Stream] = []
        self.election_id = 0

    def stream(self) -> Stream:
        s = Stream(self.stub)
        self.streams.append(s)
        return s

    def become_primary(self, election_id: int = 10) -> Stream:
        s = self.stream()
        update = s.arbitrate(election_id)
        assert update.status.code == 0, update
        self.election_id = election_id
        return s

    def set_pipeline(self, action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, cookie: int | None = 7,
                     p4info: p4i.P4Info | None = None, device_config: bytes | None = None):
        """Push the fixture pipeline (or the given parts); COMMIT sends no config, as the spec asks."""
        request = p4r.SetForwardingPipelineConfigRequest(device_id=DEVICE_ID, election_id=p4r.Uint128(low=self.election_id),
                                                         action=action)
        if action != p4r.SetForwardingPipelineConfigRequest.COMMIT:
            request.config.p4info.CopyFrom(p4info or self.p4info)
            request.config.p4_device_config = self.device_config if device_config is None else device_config
            if cookie is not None:
                request.config.cookie.cookie = cookie
        return self.stub.SetForwardingPipelineConfig(request)

    def write(self, *updates: p4r.Update, election_id: int | None = None, atomicity: int = 0) -> p4r.WriteResponse:
        return self.stub.Write(
            p4r.WriteRequest(
                device_id=DEVICE_ID,
                election_id=p4r.Uint128(low=self.election_id if election_id is None else election_id),
                updates=list(updates),
                atomicity=atomicity,
            )
        )

    def read(self, *entities: p4r.Entity) -> list[p4r.Entity]:
        out: list[p4r.Entity] = []
        for response in self.stub.Read(p4r.ReadRequest(device_id=DEVICE_ID, entities=list(entities))):
            out.extend(response.entities)
        return out

    # -- P4Info lookups by name --------------------------------------------------------------

    def table_id(self, name: str) -> int:
        return next(t.preamble.id for t in self.p4info.tables if t.preamble.name == name)

    def action_id(self, name: str) -> int:
        return next(a.preamble.id for a in self.p4info.actions if a.preamble.name == name)

    def object_id(self, kind: str, name: str) -> int:
        return next(o.preamble.id for o in getattr(self.p4info, kind) if o.preamble.name == name)

    def close(self) -> None:
        for s in self.streams:
            s.close()
        self.channel.close()
        self.server.stop(grace=0)


@pytest.fixture
def rt() -> Iterator[Runtime]:
    """A `Runtime` on the hand-written artefacts, closed after the test (import it
    into a test module to use it there)."""
    runtime = Runtime()
    yield runtime
    runtime.close()


def packet(src: str = "10.0.0.1", dst: str = "10.0.1.5") -> bytes:
    """A small UDP frame; with the defaults the fixture program's LPM routes it
    (10.0.1.0/24)."""
    return bytes(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:aa") / IP(src=src, dst=dst) / UDP() / b"x")


EVERYTHING = [
    p4r.Entity(table_entry=p4r.TableEntry(counter_data={}, meter_config={})),
    p4r.Entity(action_profile_member=p4r.ActionProfileMember()),
    p4r.Entity(action_profile_group=p4r.ActionProfileGroup()),
    p4r.Entity(counter_entry=p4r.CounterEntry()),
    p4r.Entity(meter_entry=p4r.MeterEntry()),
    p4r.Entity(register_entry=p4r.RegisterEntry()),
    p4r.Entity(value_set_entry=p4r.ValueSetEntry()),
    p4r.Entity(digest_entry=p4r.DigestEntry()),
    p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(multicast_group_entry={})),
    p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(clone_session_entry={})),
]
"""A wildcard read of every kind of entity (table entries with their direct counter and
meter data): a full read-back, for "a rejected request changed nothing" checks."""


def read_all(rt: "Runtime") -> list[p4r.Entity]:
    """Everything a wildcard Read of `EVERYTHING` returns."""
    return rt.read(*EVERYTHING)


def batch_errors(err: grpc.RpcError) -> list[p4r.Error]:
    """The per-update p4.v1.Error list of a failed Write (grpc-status-details-bin)."""
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = rpc_status.Status.FromString(value)
            errors = []
            for detail in status.details:
                e = p4r.Error()
                assert detail.Unpack(e)
                errors.append(e)
            return errors
    raise AssertionError(f"no status details in {err}")
