"""P4Runtime table writes per second, batched, against a ``p4sim switch`` process
(``p4rt_writes_per_s``).

The switch runs without ports (``--no-p4``, gRPC on a Unix socket), so the figure is
the control plane alone: the client, in this process, pushes p4src/astral.p4 and then
writes ``ENTRIES`` LPM INSERTs in WriteRequests of the most updates whose per-update
errors always reach a client (``MAX_BATCH_UPDATES``); only the INSERT RPCs are timed (the
requests are built beforehand, so the client's protobuf work is not counted). Each
round deletes its entries again, because the table holds 1024 entries, as p4c would
size it. The client is a minimal primary controller over the raw p4.v1 protobufs,
also used by bench_switch to program its switch.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable

import grpc

from p4sim.compiler import compile_file
from p4sim.proto import p4i, p4r, p4r_grpc
from p4sim.runtime.service import MAX_BATCH_UPDATES
from topo.processes import stop_process

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "p4src" / "astral.p4"
DEVICE_ID = 1
ENTRIES = 1000  # INSERTs per round: a controller programming a leaf's routes at once
ROUNDS = 5
LPM = "AstralIngress.ipv4_lpm"


def canonical(value: int) -> bytes:
    """P4Runtime's canonical binary string: the shortest big-endian form (0 is one byte)."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def lpm(value: int, prefix_len: int) -> p4r.FieldMatch:
    """An LPM match (host bits must be zero) for ``P4RuntimeClient.table_entry``."""
    return p4r.FieldMatch(lpm=p4r.FieldMatch.LPM(value=canonical(value), prefix_len=prefix_len))


class P4RuntimeClient:
    """The primary controller of one device: arbitration, pipeline push, Write.

    Names are resolved through the P4Info given to ``set_pipeline``. Enough for
    benchmarks; the controller proper uses finsy.
    """

    def __init__(self, address: str, device_id: int = DEVICE_ID, election_id: int = 1,
                 timeout: float = 20.0) -> None:
        self.device_id = device_id
        self.election_id = p4r.Uint128(low=election_id)
        self.channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(self.channel).result(timeout=timeout)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue = queue.Queue()
        self._stream = self.stub.StreamChannel(iter(self._requests.get, None))
        self._requests.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=device_id, election_id=self.election_id)))
        reply = next(self._stream)
        if reply.arbitration.status.code != 0:
            raise RuntimeError(f"{address}: not primary: {reply.arbitration.status.message}")
        self.p4info: p4i.P4Info | None = None

    def set_pipeline(self, p4info: p4i.P4Info, device_config: bytes) -> None:
        """VERIFY_AND_COMMIT the pipeline (P4Info + BMv2 JSON bytes)."""
        self.stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=self.election_id,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=p4r.ForwardingPipelineConfig(p4info=p4info, p4_device_config=device_config)))
        self.p4info = p4info

    def write(self, updates: Iterable[p4r.Update]) -> None:
        self.stub.Write(self.write_request(updates))

    def write_request(self, updates: Iterable[p4r.Update]) -> p4r.WriteRequest:
        return p4r.WriteRequest(device_id=self.device_id, election_id=self.election_id,
                                updates=list(updates))

    def table_entry(self, table: str, match: dict[str, int | p4r.FieldMatch], action: str,
                    params: dict[str, int], *, priority: int = 0, default: bool = False) -> p4r.TableEntry:
        """A direct-action entry. A match value is an int (exact match) or a FieldMatch
        without its field id (lpm, ternary, range: see ``lpm``)."""
        info = self._named(self.p4info.tables, table)
        fields = {f.name: f.id for f in info.match_fields}
        act = self._named(self.p4info.actions, action)
        param_ids = {p.name: p.id for p in act.params}
        entry = p4r.TableEntry(table_id=info.preamble.id, priority=priority, is_default_action=default)
        for name, value in match.items():
            if isinstance(value, int):
                value = p4r.FieldMatch(exact=p4r.FieldMatch.Exact(value=canonical(value)))
            field = p4r.FieldMatch()
            field.CopyFrom(value)
            field.field_id = fields[name]
            entry.match.append(field)
        entry.action.action.action_id = act.preamble.id
        for name, value in params.items():
            entry.action.action.params.append(p4r.Action.Param(param_id=param_ids[name], value=canonical(value)))
        return entry

    @staticmethod
    def update(kind: int, entry: p4r.TableEntry) -> p4r.Update:
        return p4r.Update(type=kind, entity=p4r.Entity(table_entry=entry))

    @staticmethod
    def _named(objects, name: str):
        for obj in objects:
            if obj.preamble.name == name:
                return obj
        raise KeyError(f"P4Info has no {name!r}")

    def close(self) -> None:
        self._requests.put(None)
        self._stream.cancel()
        self.channel.close()


def compiled_program() -> tuple[p4i.P4Info, bytes]:
    """p4src/astral.p4 compiled by p4sim: (P4Info, BMv2 JSON bytes)."""
    result = compile_file(str(PROGRAM))
    return result.p4info, json.dumps(result.bmv2_json).encode()


def start_switch(command: list[str], workdir: Path) -> subprocess.Popen:
    """Start a switch process (the caller ``stop``s it by PID); its stderr goes to
    ``workdir``/switch.stderr for ``connect``'s error message."""
    with open(workdir / "switch.stderr", "wb") as err:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)


def connect(proc: subprocess.Popen, address: str, workdir: Path) -> P4RuntimeClient:
    """The primary controller of the switch ``proc`` serving on ``address``; if it
    never serves, an error with what the switch said."""
    try:
        return P4RuntimeClient(address)
    except grpc.FutureTimeoutError:
        state = "running" if proc.poll() is None else f"exited with {proc.returncode}"
        said = (workdir / "switch.stderr").read_text(errors="replace")
        raise RuntimeError(f"switch ({state}) does not serve P4Runtime on {address}: {said}") from None


def p4sim_switch(address: str, workdir: Path, *args: str) -> list[str]:
    """The command of a ``p4sim switch --no-p4`` serving P4Runtime on ``address``."""
    return [sys.executable, "-m", "p4sim.cli", "switch", "--no-p4", "--device-id", str(DEVICE_ID),
            "--grpc-server-addr", address, "--log-file", str(workdir / "switch.log"), *args]


def stop(proc: subprocess.Popen) -> None:
    stop_process(proc, 10)


def batches(client: P4RuntimeClient, kind: int, entries: list[p4r.TableEntry]) -> list[p4r.WriteRequest]:
    """``entries`` as updates of ``kind``, in WriteRequests of at most MAX_BATCH_UPDATES."""
    return [client.write_request(client.update(kind, e) for e in entries[i:i + MAX_BATCH_UPDATES])
            for i in range(0, len(entries), MAX_BATCH_UPDATES)]


def write_all(client: P4RuntimeClient, requests: list[p4r.WriteRequest]) -> None:
    for request in requests:
        client.stub.Write(request)


def run() -> dict[str, float]:
    p4info, device_config = compiled_program()
    with tempfile.TemporaryDirectory(prefix="bench-p4rt-") as tmp:
        workdir = Path(tmp)
        address = f"unix:{workdir}/p4rt.sock"
        proc = start_switch(p4sim_switch(address, workdir), workdir)
        client = None
        try:
            client = connect(proc, address, workdir)
            client.set_pipeline(p4info, device_config)
            entries = [client.table_entry(LPM, {"hdr.ipv4.dstAddr": lpm(0x0A000000 + (i << 8), 24)},
                                          "AstralIngress.drop", {}) for i in range(ENTRIES)]
            inserts = batches(client, p4r.Update.INSERT, entries)
            deletes = batches(client, p4r.Update.DELETE, entries)
            write_all(client, inserts)  # warm-up round
            write_all(client, deletes)
            timed = 0.0
            for _ in range(ROUNDS):
                started = time.perf_counter()
                write_all(client, inserts)
                timed += time.perf_counter() - started
                write_all(client, deletes)
            # The writes must have done their work: a last round is read back whole.
            write_all(client, inserts)
            read = client.stub.Read(p4r.ReadRequest(device_id=DEVICE_ID, entities=[
                p4r.Entity(table_entry=p4r.TableEntry(table_id=entries[0].table_id))]))
            installed = sum(len(r.entities) for r in read)
            if installed != ENTRIES:
                raise RuntimeError(f"{ENTRIES} entries written, {installed} read back")
        finally:
            if client is not None:
                client.close()
            stop(proc)
    return {"p4rt_writes_per_s": ENTRIES * ROUNDS / timed}
