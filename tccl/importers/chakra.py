"""MLCommons Chakra execution traces (``name.<rank>.et``), read with our own schema.

A Chakra ET file is varint-length-delimited protobuf: one ``GlobalMetadata``, then
``Node`` after ``Node``. MLCommons' package is not on PyPI, so `SCHEMA` declares the
fields this reader uses with the numbers of Chakra's ``schema/protobuf/et_def.proto``
(``ChakraProtoMsg``) and protobuf parses them; fields it does not declare are skipped
as protobuf skips unknown fields. Node types: METADATA 1, COMP 4, COMM_SEND 5,
COMM_RECV 6, COMM_COLL 7; a node's ``attr`` list carries ``comm_type`` (the
``CollectiveCommType`` enum: ALL_REDUCE 0, REDUCE 1, ALL_GATHER 2, BROADCAST 5,
ALL_TO_ALL 6, REDUCE_SCATTER 7, BARRIER 9), ``comm_size`` (bytes), ``pg_name`` and, on
sends, ``comm_dst``. Process groups come from the METADATA node PyTorch records as
``## process_group:init ##``: its ``inputs.values`` holds the groups as JSON
(``[{"pg_name": "0", "ranks": [0, 1, ...]}, ...]``, possibly wrapped in ``[[...]]``).

One iteration is the file's rank's nodes in dependency order (control and data
dependencies, ties in file order), serialised: COMP nodes are compute phases
(``duration_micros``), COLL nodes collectives over the process group's ranks -- which
must be one of the fabric's named groups (tp, dp, ep rail or spread, all) --, SEND
nodes the pipeline's sends (to the next stage only), RECV nodes the other end of a send
(not counted again). The file's rank (``.<rank>.et``, else 0) is the one whose order is
taken; every rank of the job runs it.
"""

from __future__ import annotations

import heapq
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from tccl.importers.common import Counts, Imported, ImportRefused, Shape, ep_shape, merge_compute, scaled
from tccl.trace import EpShape, Step, Trace, pp_pairs, servers_of, step_groups

FORMAT = "chakra"
METADATA, COMP, SEND, RECV, COLL = 1, 4, 5, 6, 7
COMM_TYPES = {0: "allreduce", 1: "reduce", 2: "allgather", 5: "broadcast", 6: "alltoall", 7: "reducescatter"}
BARRIER = 9
PG_INIT = "## process_group:init ##"

_F = descriptor_pb2.FieldDescriptorProto


def _schema() -> dict[str, type]:
    """Message classes for the fields we read, numbered as in Chakra's et_def.proto."""
    fd = descriptor_pb2.FileDescriptorProto(name="astral_chakra_et.proto", package="ChakraProtoMsg",
                                            syntax="proto3")

    def message(name: str, fields: Sequence[tuple[str, int, int, int, str]], oneof: str | None = None) -> None:
        m = fd.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for fname, number, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = f".ChakraProtoMsg.{type_name}"
            if oneof and number > 2:
                f.oneof_index = 0

    one, rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    message("AttributeProto", [("name", 1, _F.TYPE_STRING, one, ""), ("doc_string", 2, _F.TYPE_STRING, one, ""),
                               ("int32_val", 7, _F.TYPE_INT32, one, ""), ("int64_val", 9, _F.TYPE_INT64, one, ""),
                               ("uint32_val", 11, _F.TYPE_UINT32, one, ""),
                               ("uint64_val", 13, _F.TYPE_UINT64, one, ""),
                               ("bool_val", 27, _F.TYPE_BOOL, one, ""), ("string_val", 29, _F.TYPE_STRING, one, "")],
            oneof="value")
    message("GlobalMetadata", [("version", 1, _F.TYPE_STRING, one, ""),
                               ("attr", 2, _F.TYPE_MESSAGE, rep, "AttributeProto")])
    message("IOInfo", [("values", 1, _F.TYPE_STRING, one, ""), ("shapes", 2, _F.TYPE_STRING, one, ""),
                       ("types", 3, _F.TYPE_STRING, one, "")])
    message("Node", [("id", 1, _F.TYPE_UINT64, one, ""), ("name", 2, _F.TYPE_STRING, one, ""),
                     ("type", 3, _F.TYPE_INT32, one, ""), ("ctrl_deps", 4, _F.TYPE_UINT64, rep, ""),
                     ("data_deps", 5, _F.TYPE_UINT64, rep, ""), ("start_time_micros", 6, _F.TYPE_UINT64, one, ""),
                     ("duration_micros", 7, _F.TYPE_UINT64, one, ""), ("inputs", 8, _F.TYPE_MESSAGE, one, "IOInfo"),
                     ("outputs", 9, _F.TYPE_MESSAGE, one, "IOInfo"),
                     ("attr", 10, _F.TYPE_MESSAGE, rep, "AttributeProto")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"ChakraProtoMsg.{name}"))
            for name in ("AttributeProto", "GlobalMetadata", "IOInfo", "Node")}


SCHEMA = _schema()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, next position); ValueError past the end or beyond 64 bits."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("a truncated or overlong length prefix")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


@dataclass(frozen=True)
class NodeSpec:
    """A node for `write`: compute (``duration_us``), a collective (``comm_type`` of
    `COMM_TYPES`' keys, ``comm_size``, ``pg_name``), a send (``comm_dst``) or a receive."""

    id: int
    name: str
    type: int
    duration_us: int = 0
    comm_type: int | None = None
    comm_size: int | None = None
    pg_name: str | None = None
    comm_dst: int | None = None
    deps: tuple[int, ...] = ()


def write(path: str | Path, nodes: Sequence[NodeSpec], groups: dict[str, Sequence[int]],
          version: str = "0.0.4") -> Path:
    """Save a Chakra ET: the metadata, the process groups' node, then ``nodes``."""
    Attr, Node = SCHEMA["AttributeProto"], SCHEMA["Node"]
    out = bytearray()

    def put(msg: Any) -> None:
        data = msg.SerializeToString()
        out.extend(_varint(len(data)) + data)

    put(SCHEMA["GlobalMetadata"](version=version))
    pg = Node(id=max((n.id for n in nodes), default=0) + 1, name=PG_INIT, type=METADATA)
    pg.inputs.values = "[[" + json.dumps([{"pg_name": k, "ranks": list(v)} for k, v in groups.items()]) + "]]"
    put(pg)
    for n in nodes:
        node = Node(id=n.id, name=n.name, type=n.type, duration_micros=n.duration_us, ctrl_deps=list(n.deps))
        for key, value in (("comm_type", n.comm_type), ("comm_size", n.comm_size), ("comm_dst", n.comm_dst)):
            if value is not None:
                node.attr.append(Attr(name=key, int64_val=value))
        if n.pg_name is not None:
            node.attr.append(Attr(name="pg_name", string_val=n.pg_name))
        put(node)
    path = Path(path)
    path.write_bytes(bytes(out))
    return path


def read(path: str | Path) -> tuple[Any, list[Any]]:
    """(GlobalMetadata, nodes in file order); errors name the file and the byte."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ImportRefused(f"{source}: cannot read the Chakra trace: {e.strerror}") from e
    messages, pos = [], 0
    while pos < len(data):
        start = pos
        try:
            length, pos = _read_varint(data, pos)
            if pos + length > len(data):
                raise ValueError(f"a message of {length} bytes, {len(data) - pos} left")
            msg = SCHEMA["GlobalMetadata" if not messages else "Node"]()
            msg.ParseFromString(data[pos:pos + length])
        except (ValueError, DecodeError) as e:
            what = "the GlobalMetadata" if not messages else f"node #{len(messages)}"
            raise ImportRefused(f"{source}: byte {start}: {what}: not a Chakra record: {e}") from None
        messages.append(msg)
        pos += length
    if len(messages) < 2:
        raise ImportRefused(f"{source}: a Chakra trace holds its metadata and at least one node")
    return messages[0], messages[1:]


def _attrs(node: Any) -> dict[str, Any]:
    out = {}
    for a in node.attr:
        which = a.WhichOneof("value")
        out[a.name] = getattr(a, which) if which else 0
    return out


def _process_groups(nodes: Sequence[Any], source: str) -> dict[str, list[int]]:
    """pg_name -> ranks, from the ``process_group:init`` metadata node(s)."""
    out: dict[str, list[int]] = {}
    for node in nodes:
        if "process_group:init" not in node.name:
            continue
        try:
            doc = json.loads(node.inputs.values)
            while isinstance(doc, list) and len(doc) == 1 and isinstance(doc[0], list):
                doc = doc[0]
            for g in doc:
                out[str(g["pg_name"])] = [int(r) for r in g["ranks"]]
        except (ValueError, TypeError, KeyError) as e:
            raise ImportRefused(f"{source}: node {node.id} ({node.name}): process groups as JSON "
                                f"[{{pg_name, ranks}}, ...], found {node.inputs.values[:80]!r}: {e}") from None
    return out


def _ordered(nodes: Sequence[Any]) -> tuple[list[Any], int]:
    """Nodes in dependency order, ties in file order; and how many dependencies named
    nodes that are not in the file (ignored)."""
    index = {n.id: k for k, n in enumerate(nodes)}
    waiting = {k: {index[d] for d in (*n.ctrl_deps, *n.data_deps) if d in index and index[d] != k}
               for k, n in enumerate(nodes)}
    unknown = sum(1 for n in nodes for d in (*n.ctrl_deps, *n.data_deps) if d not in index)
    users: dict[int, list[int]] = {}
    for k, deps in waiting.items():
        for d in deps:
            users.setdefault(d, []).append(k)
    ready = [k for k, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    out = []
    while ready:
        k = heapq.heappop(ready)
        out.append(nodes[k])
        for u in users.get(k, []):
            waiting[u].discard(k)
            if not waiting[u]:
                heapq.heappush(ready, u)
    if len(out) != len(nodes):
        stuck = sorted(nodes[k].id for k, deps in waiting.items() if deps)
        raise ValueError(f"dependency cycle among nodes {stuck[:10]}")
    return out, unknown


def _group_step(op: str, size: int, members: list[int], rank: int, shape: Shape) -> Step | None:
    """The named group of the fabric whose group holding ``rank`` is ``members``."""
    candidates = [Step(op=op, group=g, size=size) for g in ("tp", "dp", "all")]
    servers = len(servers_of(shape.ranks))
    if len(members) > 1 and servers % len(members) == 0:
        candidates += [Step(op=op, group="ep", size=size, ep=EpShape(len(members), layout))
                       for layout in ("rail", "spread")]
    for step in candidates:
        mine = next(g for g in step_groups(step, shape.ranks) if any(r.rank == rank for r in g))
        if sorted(r.rank for r in mine) == sorted(members):
            return step
    return None


def to_trace(meta: Any, nodes: Sequence[Any], shape: Shape, scale: float, source: str,
             iterations: int = 1) -> Imported:
    """The trace of the file rank's nodes on the fabric ``shape`` (module doc)."""
    found = re.search(r"\.(\d+)\.et$", source)
    rank = int(found.group(1)) if found else 0
    pgs = _process_groups(nodes, source)
    world = max((r for ranks in pgs.values() for r in ranks), default=shape.gpus - 1) + 1
    if world != shape.gpus:
        raise ImportRefused(f"{source}: the process groups span {world} ranks, the fabric has {shape.gpus} "
                            f"(one per NIC): import it for a fabric spec with {world} NICs")
    try:
        ordered, unknown = _ordered(nodes)
    except ValueError as e:
        raise ImportRefused(f"{source}: {e}") from None
    pipeline = dict(pp_pairs(shape.ranks))
    counts, steps, receives, barriers = Counts(), [], 0, 0
    for node in ordered:
        where = f"{source}: node {node.id} ({node.name})"
        attrs = _attrs(node)
        if node.type == COMP:
            steps.append(Step(compute_ms=node.duration_micros / 1000))
        elif node.type == RECV:
            receives += 1
        elif node.type in (COLL, SEND):
            size = int(attrs.get("comm_size", 0))
            if node.type == COLL and attrs.get("comm_type") == BARRIER:
                barriers += 1
                continue
            if size <= 0:
                raise ImportRefused(f"{where}: comm_size {size}: a collective moves something")
            if node.type == SEND:
                dst = int(attrs.get("comm_dst", -1))
                if pipeline.get(rank) != dst:
                    raise ImportRefused(f"{where}: a send from rank {rank} to {dst}: the testbed's pipeline "
                                        f"sends only to the next stage ({pipeline.get(rank)})")
                steps.append(counts.add(Step(op="sendrecv", group="pp", size=scaled(size, scale)), size))
                continue
            op = COMM_TYPES.get(int(attrs.get("comm_type", -1)))
            if op is None:
                raise ImportRefused(f"{where}: comm_type {attrs.get('comm_type')!r} has no testbed collective "
                                    f"(known: {COMM_TYPES}, barrier {BARRIER})")
            pg = str(attrs.get("pg_name", ""))
            if pg not in pgs:
                raise ImportRefused(f"{where}: pg_name {pg!r}: no such process group (known: {sorted(pgs)})")
            step = _group_step(op, scaled(size, scale), pgs[pg], rank, shape)
            if step is None:
                raise ImportRefused(f"{where}: process group {pg!r} (ranks {pgs[pg]}) is none of the fabric's "
                                    f"groups of rank {rank} (tp, dp, ep rail or spread, all)")
            steps.append(counts.add(step, size))
    merged = merge_compute(steps)
    if not any(s.op for s in merged):
        raise ImportRefused(f"{source}: no collective or send: nothing for the network to do")
    notes = [f"rank {rank}'s order, dependencies serialised (version {meta.version or '?'}); "
             f"{receives} receives (counted at their senders), {barriers} barriers skipped"]
    if unknown:
        notes.append(f"{unknown} dependencies on nodes not in the file ignored")
    trace = Trace(name=Path(source).name.split(".")[0], iterations=iterations, steps=tuple(merged),
                  ep=ep_shape(merged))
    return Imported(trace, source, FORMAT, scale, counts, notes)


def import_file(path: str | Path, shape: Shape, scale: float, iterations: int = 1) -> Imported:
    meta, nodes = read(path)
    return to_trace(meta, nodes, shape, scale, str(path), iterations)
